#!/usr/bin/env bash
# Builds and runs every test, then prints "N passed, N failed" counted over test
# cases (gtest cases and end-to-end checks), read from Bazel's test.xml files.
set -uo pipefail
cd "$(dirname "$0")/.."
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
MODEL="${BRAID_MODEL:-$(scripts/fetch_model.sh)}"

# The default model as llama.cpp's quantizer writes it in the K-quants
# (//tests/golden:kquant_golden_test); that test fails, naming what is
# missing, when this could not be done.
KQUANT_DIR="$CACHE/models/kquant"
if LLAMA_PY="$(scripts/llama_venv.sh)" &&
    BRAID_CACHE="$CACHE" "$LLAMA_PY" tools/golden/kquant_models.py "$KQUANT_DIR" "$MODEL" >/dev/null; then
  export BRAID_KQUANT_DIR="$KQUANT_DIR"
else
  echo "test: could not write the K-quant models (see above)" >&2
fi

# Random-weight models of the other architectures (//tests/golden:arch_golden_test).
ARCH_DIR="$CACHE/models/arch"
if BRAID_CACHE="$CACHE" "$CACHE/venv/bin/python" tools/golden/arch_models.py "$ARCH_DIR" "$MODEL" >/dev/null; then
  export BRAID_ARCH_DIR="$ARCH_DIR"
else
  echo "test: could not write the architecture test models (see above)" >&2
fi

bazel test //... \
  --test_env=BRAID_MODEL="$MODEL" \
  --test_env=BRAID_PYTHON="$CACHE/venv/bin/python" \
  "$@"
rc=$?

# Only the test targets that exist now (bazel-testlogs keeps old ones).
targets="$(bazel query 'tests(//...) except attr(tags, manual, //...)' 2>/dev/null)"
python3 - "$rc" $targets <<'PY'
import os, sys, xml.etree.ElementTree as ET
rc = int(sys.argv[1])
passed = failed = 0
for target in sys.argv[2:]:
    path = os.path.join("bazel-testlogs", target.lstrip("/").replace(":", "/"), "test.xml")
    if not os.path.exists(path):
        failed += 1  # the target did not run (build failure)
        continue
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for case in root.iter("testcase"):
        bad = case.find("failure") is not None or case.find("error") is not None
        failed += bad
        passed += not bad
if rc != 0 and failed == 0:
    failed = 1  # the build or a test runner failed before any case reported
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
