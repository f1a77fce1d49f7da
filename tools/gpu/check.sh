#!/usr/bin/env bash
# The GPU check of the CUDA executor (issue 32), run on the GPU machine from
# the repository root after tools/gpu/prepare.sh built .gpu/ here:
#   device run --carry .gpu -- tools/gpu/check.sh
# Three phases, in order, within CHECK_BUDGET_S seconds (default 530: under
# 9 minutes), each run under a timeout cut to the time left:
#   tests  every gpu-tagged test (the kernels' conformance against
#          kernels/cpu, the whole model against the CPU model);
#   e2e    tools/gpu/e2e.sh: braidd on the CPU and on CUDA serving one
#          random-weight model (greedy outputs compared, a session with
#          branches, a cancel and its KV blocks): $OUT/e2e.json;
#   bench  model/cuda:cuda_bench on SmolLM2-135M's, Llama-3.2-1B's and
#          Llama-3.1-8B's shapes (the small ones also with programmatic
#          dependent launch; 8B's throughput only if time is left):
#          $OUT/bench.jsonl, each run's log beside it.
# CHECK_PHASES picks some ("e2e bench": a rerun without the tests). Writes
# $OUT/gpu_check.json and $OUT/gpu_check.txt (a table: one row per test,
# e2e and bench run), each test's gtest JSON and log beside them. Fails when
# a test or e2e check fails, a phase cannot start (a missing library is
# named), or a test is skipped for lack of time; a bench run that fails or
# is skipped is only reported.
# --dry-run: checks the layout and the libraries without running anything
# (the part that can run on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
phases="${CHECK_PHASES:-tests e2e bench}"
start_s=$(date +%s)
deadline_s=$(( start_s + ${CHECK_BUDGET_S:-530} ))
root=.gpu
export LD_LIBRARY_PATH="$PWD/$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
if [ ! -x "$root/bin/server/braidd" ]; then
  echo "check: $root/bin is missing: run tools/gpu/prepare.sh and carry .gpu" >&2
  exit 2
fi
if [ "$dry" = 0 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    | tee "$OUT/gpu.txt" || echo "check: nvidia-smi failed" >&2
fi
tests=$(cd "$root/bin" && find . -name '*_gpu_test' -type f | sed 's|^\./||' | sort)
tools="server/braidd model/cuda/cuda_bench model/testing/write_random_llama
  tools/gpu/gpu_e2e"
missing=0
for f in $tools $tests; do
  if [ ! -x "$root/bin/$f" ]; then
    echo "check: $root/bin/$f is missing: rerun tools/gpu/prepare.sh" >&2
    missing=1
  elif ldd "$root/bin/$f" | grep -q "not found"; then
    echo "check: $f cannot load: $(ldd "$root/bin/$f" | grep 'not found' | tr -s ' \n' ' ')" >&2
    missing=1
  fi
done
if [ ! -s "$root/tokenizer.gguf" ]; then
  echo "check: $root/tokenizer.gguf is missing: rerun tools/gpu/prepare.sh" >&2
  missing=1
fi
[ "$dry" = 1 ] && { echo "check: dry run: $(echo "$tests" | wc -w) test binaries, braidd, cuda_bench, write_random_llama, gpu_e2e and the tokenizer, libraries $([ $missing = 0 ] && echo complete || echo MISSING)"; exit $missing; }
rc=$missing
: > "$OUT/results.tsv"

left() { echo $(( deadline_s - $(date +%s) )); }
# run_phase PHASE NAME LIMIT CMD...: CMD under timeout LIMIT (cut to the
# time left), one row of results.tsv (phase, name, exit code, seconds); sets
# $code.
run_phase() {
  local phase=$1 name=$2 limit=$3
  shift 3
  local t; t=$(left)
  [ "$t" -lt "$limit" ] && limit=$t
  if [ "$limit" -lt 20 ]; then
    code=skip
    printf '%s\t%s\tskip\t0\n' "$phase" "$name" >> "$OUT/results.tsv"
    echo "check: $name skipped: ${t} s left" >&2
    return
  fi
  local s; s=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@"
  code=$?
  printf '%s\t%s\t%s\t%s\n' "$phase" "$name" "$code" \
    "$(python3 -c "import time; print(round(time.time() - $s, 1))")" \
    >> "$OUT/results.tsv"
}

# The tests: each may take 300 s, less what e2e and bench need at least.
if [[ " $phases " == *" tests "* ]]; then
  for t in $tests; do
    name=$(basename "$t")
    reserve=0
    [[ " $phases " == *" e2e "* ]] && reserve=$(( reserve + 90 ))
    [[ " $phases " == *" bench "* ]] && reserve=$(( reserve + 90 ))
    limit=$(( $(left) - reserve ))
    [ "$limit" -gt 300 ] && limit=300
    run_phase tests "$name" "$limit" "$root/bin/$t" \
      --gtest_output="json:$OUT/$name.json" >"$OUT/$name.log" 2>&1
    [ "$code" = 0 ] || rc=1
  done
fi

if [[ " $phases " == *" e2e "* ]]; then
  limit=240
  [[ " $phases " == *" bench "* ]] && [ $(( $(left) - 90 )) -lt $limit ] \
    && limit=$(( $(left) - 90 ))
  run_phase e2e e2e "$limit" tools/gpu/e2e.sh "$OUT" >"$OUT/e2e.log" 2>&1
  [ "$code" = 0 ] || rc=1
fi

# bench_run NAME LIMIT FLAGS...: one cuda_bench run into bench.jsonl.
bench_run() {
  local name=$1 limit=$2
  shift 2
  local before; before=$(wc -l < "$OUT/bench.jsonl")
  run_phase bench "cuda_bench $name" "$limit" "$root/bin/model/cuda/cuda_bench" \
    --json="$OUT/bench.jsonl" "$@" >"$OUT/bench_${name// /_}.log" 2>&1
  # cases: the measurements it wrote
  sed -i "\$s/\$/\t$(( $(wc -l < "$OUT/bench.jsonl") - before ))/" "$OUT/results.tsv"
}
if [[ " $phases " == *" bench "* ]]; then
  : > "$OUT/bench.jsonl"
  # Decode and throughput through ForwardTop k = 1, as the engine's greedy
  # steps (decode also with lookahead).
  tput="--nodecode --throughput --top_k=1"
  bench_run smollm2-135m 60 --shape=smollm2-135m --top_k=1
  bench_run "smollm2-135m throughput" 60 --shape=smollm2-135m $tput
  bench_run llama-1b 90 --shape=llama-1b --top_k=1
  bench_run "llama-1b throughput" 90 --shape=llama-1b $tput
  # Programmatic dependent launch against the graphs-on runs above (braidd's
  # --cuda_pdl): where launch gaps matter most, the small shapes.
  bench_run "smollm2-135m pdl" 45 --shape=smollm2-135m --top_k=1 --graphs=both --pdl=on
  bench_run "llama-1b pdl" 60 --shape=llama-1b --top_k=1 --graphs=both --pdl=on
  bench_run llama-8b 120 --shape=llama-8b --top_k=1
  if [ "$(left)" -ge 120 ]; then
    bench_run "llama-8b throughput" 180 --shape=llama-8b $tput --graphs=on
  else
    printf 'bench\tcuda_bench llama-8b throughput\tskip\t0\t0\n' >> "$OUT/results.tsv"
  fi
fi

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows, report = [], {"tests": []}
for line in open(os.path.join(out, "results.tsv")):
    phase, name, code, secs, *rest = line.rstrip("\n").split("\t")
    cases = failed = 0
    path = os.path.join(out, name + ".json")
    if rest:  # a bench run: the measurements it wrote
        cases, failed = int(rest[0]), int(code not in ("0", "skip"))
    elif os.path.exists(path):  # gtest's JSON, or e2e's of the same shape
        j = json.load(open(path))
        cases, failed = j.get("tests", 0), j.get("failures", 0)
    report["tests"].append({"phase": phase, "name": name, "exit": code,
                            "seconds": float(secs), "cases": cases,
                            "failures": failed})
    result = {"0": "ok", "skip": "skipped (time)"}.get(code, f"FAIL ({code})")
    rows.append(f"| {phase} | {name} | {result} | {cases} | {failed} | {secs} |")
json.dump(report, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
table = ("| phase | test | result | cases | failures | seconds |\n"
         "| --- | --- | --- | ---: | ---: | ---: |\n" + "\n".join(rows))
open(os.path.join(out, "gpu_check.txt"), "w").write(table + "\n")
print(table)
PY
echo "check: done in $(( $(date +%s) - start_s )) s"
exit $rc
