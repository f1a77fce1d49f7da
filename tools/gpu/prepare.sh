#!/usr/bin/env bash
# Builds, here, everything the GPU check (tools/gpu/check.sh) runs, and puts
# it under .gpu/ (ignored by git; pass it to the device tool as `carry`):
# the gpu-tagged test binaries and braidd built with --config=cuda, with the
# shared libraries they load (Bazel's and the system's, not CUDA's: the GPU
# machine's own libcudart/libcublasLt are used). Nothing builds on the GPU
# machine. Prints the size (the device tool carries at most 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
targets="$(bazel query 'attr(tags, "\bgpu\b", //...)' 2>/dev/null)"
bazel build --config=cuda //server:braidd $targets
bin="$(bazel info --config=cuda bazel-bin 2>/dev/null)"
copy() {  # a built file under bin, keeping its path (RUNPATH is relative)
  mkdir -p "$out/bin/$(dirname "$1")"
  cp -L "$bin/$1" "$out/bin/$1"
}
copy server/braidd
for t in $targets; do
  path="${t#//}"
  copy "${path/://}"
done
cp -rL "$bin/_solib_k8" "$out/bin/_solib_k8"
# System libraries outside libc/libstdc++ and CUDA: the GPU machine may not
# have Debian's gRPC, protobuf, abseil and prometheus-cpp packages.
for f in "$out"/bin/server/braidd "$out"/bin/*/*/*_gpu_test "$out"/bin/*/*_gpu_test; do
  [ -f "$f" ] || continue
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -e /usr/local/cuda -e '/libc\.so' -e '/libm\.so' \
  -e '/ld-linux' -e '/libstdc++' -e '/libgcc_s' -e '/libpthread' -e '/libdl' \
  -e '/librt\.' -e '_solib_k8' | while read -r lib; do cp -L "$lib" "$out/lib/"; done
du -sh "$out"
