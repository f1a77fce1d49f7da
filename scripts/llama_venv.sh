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
set -euo pipefail
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
VENV="$CACHE/llama-venv"
VERSION=0.3.36
if "$VENV/bin/python" -c "import llama_cpp, numpy, gguf; assert llama_cpp.__version__ == '$VERSION'" \
    2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
echo "llama_venv: building llama-cpp-python $VERSION into $VENV (about 15 minutes on two cores)" >&2
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
  "$VENV/bin/pip" install -q "llama-cpp-python==$VERSION" numpy gguf >&2
echo "$VENV/bin/python"
