#!/usr/bin/env bash
# Builds Debian's own abseil and gRPC sources (the installed versions, with
# Debian's patches) as shared libraries under ThreadSanitizer, once (about 3
# minutes for abseil and 15 for gRPC's core and C++ library on two cores),
# into $BRAID_CACHE/tsan/lib (default ~/.cache/braid/tsan/lib), and prints
# that directory. `--config=tsan` tests run with it first on
# LD_LIBRARY_PATH: the libraries keep Debian's sonames and ABI, so binaries
# linked against Debian's load these instead, and ThreadSanitizer sees the
# ordering that absl::Mutex, absl::CondVar and absl::Notification give and
# how gRPC hands buffers and calls between its threads (its own atomics).
# With Debian's uninstrumented libraries every access guarded by an
# absl::Mutex is reported as a race, and braidd hundreds more inside gRPC
# (docs/TESTING.md).
#
# The source comes from Debian's archive (deb-src of the suite installed),
# through a private apt state under the cache: the system's apt setup is
# not changed.
set -euo pipefail
cache="${BRAID_CACHE:-$HOME/.cache/braid}/tsan"
lib="$cache/lib"
version="$(dpkg-query -W -f='${source:Version}' libabsl-dev)"
grpc_version="$(dpkg-query -W -f='${source:Version}' libgrpc-dev)"
stamp="$lib/.built-$version-grpc-$grpc_version"
if [ -f "$stamp" ]; then
  echo "$lib"
  exit 0
fi
for tool in cmake dpkg-source g++ make; do
  command -v "$tool" >/dev/null || {
    echo "tsan_libs.sh: $tool is missing (apt-get install cmake dpkg-dev g++ make)" >&2
    exit 1
  }
done
apt="$cache/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources"
suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
cat > "$apt/sources/src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
aptopts=(-o "Dir::Etc::SourceList=$apt/sources/src.sources"
  -o "Dir::Etc::SourceParts=/nonexistent" -o "Dir::State::Lists=$apt/lists"
  -o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1" -q)
src="$cache/src"
# fetch PACKAGE VERSION DIR: Debian's source of PACKAGE=VERSION in $src/DIR.
fetch() {
  [ -d "$src/$3" ] && return 0
  echo "tsan_libs.sh: fetching $1 $2 source from Debian" >&2
  apt-get "${aptopts[@]}" update >&2
  rm -rf "$src/.get-$3" && mkdir -p "$src/.get-$3"
  (cd "$src/.get-$3" && apt-get "${aptopts[@]}" source --download-only "$1=$2" >&2 &&
    dpkg-source -x ./*.dsc tree >&2 && mv tree "$src/$3") && rm -rf "$src/.get-$3"
}
fetch abseil "$version" absl
fetch grpc "$grpc_version" grpc
tsan=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_STANDARD=17
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF
  -DCMAKE_C_FLAGS="-fsanitize=thread -O1 -g1"
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -g1"
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread")
rm -rf "$lib.new" && mkdir -p "$lib.new"
echo "tsan_libs.sh: building abseil under ThreadSanitizer (once)" >&2
build="$cache/build-absl"
rm -rf "$build"
cmake -S "$src/absl" -B "$build" "${tsan[@]}" -DCMAKE_INSTALL_PREFIX="$cache/install" >&2
cmake --build "$build" -j"$(nproc)" >&2
cmake --install "$build" >&2
cp -a "$cache/install/lib/"*.so* "$lib.new"/ 2>/dev/null ||
  cp -a "$cache/install/lib64/"*.so* "$lib.new"/
rm -rf "$build"
# gRPC against Debian's abseil, protobuf, re2, c-ares, OpenSSL and zlib, as
# Debian builds it; only the libraries braidd loads (no code generators).
echo "tsan_libs.sh: building gRPC under ThreadSanitizer (once, about 15 minutes)" >&2
build="$cache/build-grpc"
rm -rf "$build"
multiarch="$(gcc -print-multiarch)"
protoc_lib="$(ls /usr/lib/"$multiarch"/libprotoc.so* | head -1)"
cmake -S "$src/grpc" -B "$build" "${tsan[@]}" \
  -DgRPC_ABSL_PROVIDER=package -DgRPC_CARES_PROVIDER=package \
  -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_RE2_PROVIDER=package \
  -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
  -DgRPC_BENCHMARK_PROVIDER=none -DgRPC_BUILD_TESTS=OFF \
  -DgRPC_BACKWARDS_COMPATIBILITY_MODE=OFF -DgRPC_BUILD_CODEGEN=OFF \
  -DgRPC_BUILD_CSHARP_EXT=OFF -DgRPC_BUILD_GRPC_CPP_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF \
  -DProtobuf_PROTOC_LIBRARY="$protoc_lib" >&2
cmake --build "$build" --target grpc++ -j"$(nproc)" >&2
for l in address_sorting gpr grpc grpc++ upb; do
  cp -a "$build/lib$l.so"* "$lib.new"/
done
rm -rf "$build"
rm -rf "$lib" && mv "$lib.new" "$lib"
touch "$stamp"
echo "$lib"
