#!/usr/bin/env bash
# First call on the other machine (see pack.sh): unpacks into $D (/tmp/dev)
# and prints the CPU, its read bandwidth and the hand-off between threads.
A=${A:?A=the pack.sh A_DIR}; D=${D:-/tmp/dev}; PY=${PY:-python3}
mkdir -p "$D/site" && cp "$A/m1" "$D/" && tar -xJf "$A/stage.tar.xz" -C "$D" || exit 1
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$D/site" ${WHL:-$A/whl/*.whl} || exit 1
export LD_LIBRARY_PATH=$D/lib PYTHONPATH=$D/site:$D/py
lscpu; free -g
for t in 2 8; do "$D/bin/llama_bench" --probe --threads $t; done
"$PY" -c "import llama_cpp, grpc, grpc_tools, grpc_health; print('python ok', llama_cpp.__version__, grpc.__version__)"
