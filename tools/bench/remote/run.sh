#!/usr/bin/env bash
# Second call on the other machine (see pack.sh): joins the model and runs
# cpu_bench.py at 2, 8, 4 and 16 threads and session_bench.py at 2 and 8.
B=${B:?B=the pack.sh B_DIR}; D=${D:-/tmp/dev}; PY=${PY:-python3}
OUT=${OUT:-/tmp/remote_bench}; mkdir -p "$OUT"
cat "$D/m1" "$B/m2" > "$D/model.gguf" && md5sum "$D/model.gguf" || exit 1
export LD_LIBRARY_PATH=$D/lib PYTHONPATH=$D/site:$D/py PYTHONUNBUFFERED=1
R=${R:-3}
cb() { "$PY" tools/bench/cpu_bench.py --model "$D/model.gguf" --braid_bench "$D/bin/llama_bench" --reps 2 ${Q:-} "$@"; }
sb() { "$PY" tools/bench/session_bench.py --model "$D/model.gguf" --braidd "$D/bin/braidd" --quiet_wait 10 ${QS:-} "$@"; }
cb --threads 2 --rounds "$R" 2>&1 | tee "$OUT/cpu_t2.txt"
sb --threads 2 --rounds "$R" 2>&1 | tee "$OUT/session_t2.txt"
cb --threads 8 --rounds 2 2>&1 | tee "$OUT/cpu_t8.txt"
sb --threads 8 --rounds 2 2>&1 | tee "$OUT/session_t8.txt"
cb --threads 4 --rounds 2 2>&1 | tee "$OUT/cpu_t4.txt"
cb --threads 16 --rounds 1 2>&1 | tee "$OUT/cpu_t16.txt"
