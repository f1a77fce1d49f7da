#!/usr/bin/env bash
# The GPU check of the CUDA executor (issue 32), run on the GPU machine from
# the repository root after tools/gpu/prepare.sh built .gpu/ here:
#   device run --carry .gpu -- tools/gpu/check.sh
# Runs every gpu-tagged test (the kernels' conformance against kernels/cpu,
# the whole model against the CPU model) and writes $OUT/gpu_check.json and
# $OUT/gpu_check.txt (a table), each test's gtest JSON and log beside them.
# Fails when a test fails or cannot start (a missing library is named).
# --dry-run: checks the layout and the libraries without running tests (the
# part that can run on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
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
missing=0
for f in server/braidd $tests; do
  if ldd "$root/bin/$f" | grep -q "not found"; then
    echo "check: $f cannot load: $(ldd "$root/bin/$f" | grep 'not found' | tr -s ' \n' ' ')" >&2
    missing=1
  fi
done
[ "$dry" = 1 ] && { echo "check: dry run: $(echo "$tests" | wc -w) test binaries and braidd, libraries $([ $missing = 0 ] && echo complete || echo MISSING)"; exit $missing; }
rc=$missing
: > "$OUT/results.tsv"
for t in $tests; do
  name=$(basename "$t")
  start=$(date +%s.%N)
  timeout 300 "$root/bin/$t" --gtest_output="json:$OUT/$name.json" >"$OUT/$name.log" 2>&1
  code=$?
  secs=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  [ $code = 0 ] || rc=1
  printf '%s\t%s\t%s\n' "$name" "$code" "$secs" >> "$OUT/results.tsv"
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows, report = [], {"tests": []}
for line in open(os.path.join(out, "results.tsv")):
    name, code, secs = line.rstrip("\n").split("\t")
    cases = failed = 0
    path = os.path.join(out, name + ".json")
    if os.path.exists(path):
        j = json.load(open(path))
        cases, failed = j.get("tests", 0), j.get("failures", 0)
    report["tests"].append({"name": name, "exit": int(code), "seconds": float(secs),
                            "cases": cases, "failures": failed})
    rows.append(f"| {name} | {'ok' if code == '0' else 'FAIL (' + code + ')'} | {cases} | {failed} | {secs} |")
json.dump(report, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
table = "| test | result | cases | failures | seconds |\n| --- | --- | ---: | ---: | ---: |\n" + "\n".join(rows)
open(os.path.join(out, "gpu_check.txt"), "w").write(table + "\n")
print(table)
PY
exit $rc
