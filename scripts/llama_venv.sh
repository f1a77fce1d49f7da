#!/usr/bin/env bash
# Creates (once) the virtual environment with llama-cpp-python that the tests
# comparing braid with llama.cpp need beyond the committed fixtures: today the
# K-quant golden test's files, which llama.cpp's own quantizer writes
# (tools/golden/kquant_models.py). Prints the environment's python.
#
# llama-cpp-python builds llama.cpp from source: about 15 minutes on two
# cores, once per machine (the environment lives in the cache directory).
# The build targets AVX2 rather than the build machine's CPU, so the same
# llama.cpp runs on every machine that runs braid's AVX2 kernels.
#
# `scripts/llama_venv.sh avx512` builds the AVX-512 peer instead, into its
# own environment (llama512-venv): AVX-512 with the VBMI, VNNI and BF16
# extensions this CPU has, without AMX (ggml's AMX path crashes on 2-vCPU
# Xeons, ggml-org/llama.cpp#20824). tools/bench/cpu_bench.py run by that
# python compares braid's AVX-512 kernels with llama.cpp's.
set -euo pipefail
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
VERSION=0.3.36
COMMON="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
if [ "${1:-avx2}" = avx512 ]; then
  VENV="$CACHE/llama512-venv"
  WANT="b'AVX512 = 1' in info"
  has() { grep -qw "$1" /proc/cpuinfo && echo ON || echo OFF; }
  [ "$(has avx512_vnni)" = ON ] ||
    { echo "llama_venv: this CPU has no AVX-512 VNNI" >&2; exit 1; }
  ISA="-DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON \
-DGGML_AVX512_VBMI=$(has avx512vbmi) -DGGML_AVX512_BF16=$(has avx512_bf16) \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
  VENV="$CACHE/llama-venv"
  WANT="b'AVX2 = 1' in info and b'AVX512 = 1' not in info"
  ISA="-DGGML_AVX512=OFF"
fi
if "$VENV/bin/python" -c "import llama_cpp, numpy, gguf; assert llama_cpp.__version__ == '$VERSION'; \
info = llama_cpp.llama_print_system_info(); assert $WANT" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
echo "llama_venv: building llama-cpp-python $VERSION into $VENV (about 15 minutes on two cores)" >&2
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
# llama-cpp-python's own dependencies (it is installed with --no-deps).
"$VENV/bin/pip" install -q numpy gguf typing_extensions diskcache jinja2 >&2
# --no-cache-dir: pip's wheel cache does not tell the two builds apart.
CMAKE_ARGS="$COMMON $ISA" CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "$VENV/bin/pip" install -q --force-reinstall --no-deps --no-cache-dir \
  "llama-cpp-python==$VERSION" >&2
echo "$VENV/bin/python"
