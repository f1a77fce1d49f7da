#!/usr/bin/env bash
# Builds Debian's own abseil source (the installed version, with Debian's
# patches) as shared libraries under ThreadSanitizer, once, into
# $BRAID_CACHE/tsan/lib (default ~/.cache/braid/tsan/lib), and prints that
# directory. `--config=tsan` tests run with it first on LD_LIBRARY_PATH: the
# libraries keep Debian's sonames and ABI, so the binaries linked against
# Debian's abseil load these instead, and ThreadSanitizer sees the ordering
# that absl::Mutex, absl::CondVar and absl::Notification give (in braid and
# in gRPC, whose locks are absl::Mutex). Without them every access guarded by
# an absl::Mutex is reported as a race (docs/TESTING.md).
#
# The source comes from Debian's archive (deb-src of the suite installed),
# through a private apt state under the cache: the system's apt setup is
# not changed.
set -euo pipefail
cache="${BRAID_CACHE:-$HOME/.cache/braid}/tsan"
lib="$cache/lib"
version="$(dpkg-query -W -f='${Version}' libabsl-dev)"
stamp="$lib/.built-$version"
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
if [ ! -d "$src/absl" ]; then
  echo "tsan_libs.sh: fetching abseil $version source from Debian" >&2
  apt-get "${aptopts[@]}" update >&2
  rm -rf "$src" && mkdir -p "$src"
  (cd "$src" && apt-get "${aptopts[@]}" source --download-only "abseil=$version" >&2 &&
    dpkg-source -x ./*.dsc absl-src >&2 && mv absl-src absl)
fi
echo "tsan_libs.sh: building abseil with -fsanitize=thread (a few minutes, once)" >&2
build="$cache/build"
rm -rf "$build"
cmake -S "$src/absl" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -g" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$cache/install" >&2
cmake --build "$build" -j"$(nproc)" >&2
cmake --install "$build" >&2
rm -rf "$lib" && mkdir -p "$lib"
cp -a "$cache/install/lib/"*.so* "$lib"/ 2>/dev/null ||
  cp -a "$cache/install/lib64/"*.so* "$lib"/
rm -rf "$build"
touch "$stamp"
echo "$lib"
