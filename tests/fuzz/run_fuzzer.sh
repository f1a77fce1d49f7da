#!/usr/bin/env bash
# Runs a libFuzzer binary ($1) for a fixed budget ($3: -runs=N inputs or
# -max_total_time=SECONDS) from the committed seed corpus ($2), in a scratch
# copy (the fuzzer adds to its corpus). A crash, leak or sanitizer report fails the test and leaves the
# reproducer in $TEST_UNDECLARED_OUTPUTS_DIR.
set -euo pipefail
fuzzer="$1" seeds="$2" budget="$3"
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
mkdir -p "$work"
cp "$seeds"/* "$work"/
out="${TEST_UNDECLARED_OUTPUTS_DIR:-$TEST_TMPDIR}"
exec "$fuzzer" "$budget" -seed=1 -print_final_stats=1 -artifact_prefix="$out/" "$work"
