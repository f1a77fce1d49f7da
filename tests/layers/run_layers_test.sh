#!/usr/bin/env bash
# layers_test.py needs only the standard library: the system's python3.
set -euo pipefail
exec python3 "$(dirname "$0")/layers_test.py" "$@"
