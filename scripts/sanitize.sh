#!/usr/bin/env bash
# The whole suite under one sanitizer: `make test-asan` (AddressSanitizer +
# UndefinedBehaviorSanitizer) or `make test-tsan` (ThreadSanitizer, with
# abseil built under it: scripts/tsan_libs.sh). make test runs a chosen
# subset of each (docs/TESTING.md); this runs every test, which takes
# several times longer than make test. Extra arguments go to bazel test.
set -uo pipefail
cd "$(dirname "$0")/.."
config="${1:?usage: scripts/sanitize.sh asan|tsan [bazel test args]}"
shift
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
MODEL="${BRAID_MODEL:-$(scripts/fetch_model.sh)}"
env=(--test_env=BRAID_MODEL="$MODEL" --test_env=BRAID_PYTHON="$CACHE/venv/bin/python"
  --test_env=BRAID_CACHE="$CACHE"
  --test_env=BRAID_KQUANT_DIR="$CACHE/models/kquant" --test_env=BRAID_ARCH_DIR="$CACHE/models/arch")
case "$config" in
  asan) ;;
  tsan)
    lib="$(scripts/tsan_libs.sh)" || exit 1
    env+=(--test_env=LD_LIBRARY_PATH="$lib"
      --test_env=TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/sanitizers/tsan.supp") ;;
  *) echo "sanitize.sh: unknown sanitizer $config (asan or tsan)" >&2; exit 2 ;;
esac
exec bazel test --config="$config" //... "${env[@]}" "$@"
