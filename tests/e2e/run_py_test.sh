#!/usr/bin/env bash
# Runs a Python end-to-end test with the interpreter from `make test`'s
# virtual environment (grpcio, grpcio-tools, numpy).
set -euo pipefail
if [ -z "${BRAID_PYTHON:-}" ] || [ ! -x "$BRAID_PYTHON" ]; then
  echo "FAIL: BRAID_PYTHON is not an interpreter with grpcio; run \`make test\`" \
       "(scripts/setup.sh creates ~/.cache/braid/venv)" >&2
  exit 1
fi
script="$1"
shift
exec "$BRAID_PYTHON" "$script" "$@"
