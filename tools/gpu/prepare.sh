#!/usr/bin/env bash
# Builds, here, everything the GPU check (tools/gpu/check.sh) runs, and puts
# it under .gpu/ (ignored by git; pass it to the device tool as `carry`):
# the gpu-tagged test binaries, model/cuda:cuda_bench and braidd built with
# --config=cuda, write_random_llama and the end-to-end client gpu_e2e, with
# the shared libraries they load (Bazel's and the system's, not CUDA's: the
# GPU machine's own libcudart/libcublasLt are used), and tokenizer.gguf: the
# tokenizer of $BRAID_MODEL (default: SmolLM2-135M-Instruct.Q4_1 in
# ~/.cache/braid/models) without its weights, which write_random_llama gives
# the random model the end-to-end check serves (the GPU machine has no
# model). Nothing builds on the GPU machine. Prints the size and fails over
# the device tool's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu
model="${BRAID_MODEL:-$HOME/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$model" ] || { echo "prepare: no model at $model (set BRAID_MODEL)" >&2; exit 2; }
targets="$(bazel query 'attr(tags, "\bgpu\b", //...)' 2>/dev/null)"
tools="//server:braidd //model/testing:write_random_llama //tools/gpu:gpu_e2e"
bazel build --config=cuda $tools //model/testing:write_tokenizer_gguf $targets
bin="$(bazel info --config=cuda bazel-bin 2>/dev/null)"
rm -rf "$out"  # only once everything built
mkdir -p "$out/bin" "$out/lib"
copy() {  # a built file under bin, keeping its path (RUNPATH is relative)
  mkdir -p "$out/bin/$(dirname "$1")"
  cp -L "$bin/$1" "$out/bin/$1"
}
for t in $tools $targets; do
  path="${t#//}"
  copy "${path/://}"
done
cp -rL "$bin/_solib_k8" "$out/bin/_solib_k8"
"$bin/model/testing/write_tokenizer_gguf" --from="$model" --out="$out/tokenizer.gguf"
# System libraries outside libc/libstdc++ and CUDA: the GPU machine may not
# have Debian's gRPC, protobuf, abseil and prometheus-cpp packages.
find "$out/bin" -path "$out/bin/_solib_k8" -prune -o -type f -perm -u+x -print \
  | while read -r f; do ldd "$f" | awk '$3 ~ /^\// {print $3}'; done \
  | sort -u | grep -v -e /usr/local/cuda -e '/libc\.so' -e '/libm\.so' \
  -e '/ld-linux' -e '/libstdc++' -e '/libgcc_s' -e '/libpthread' -e '/libdl' \
  -e '/librt\.' -e '_solib_k8' | while read -r lib; do cp -L "$lib" "$out/lib/"; done
du -sh "$out"
size_mb=$(du -sm "$out" | cut -f1)
if [ "$size_mb" -gt 64 ]; then
  echo "prepare: $out is ${size_mb} MiB, over the 64 MiB the device tool carries" >&2
  exit 1
fi
