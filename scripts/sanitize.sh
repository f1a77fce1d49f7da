#!/usr/bin/env bash
# Tests under one sanitizer, with the environment they need: asan
# (AddressSanitizer + UndefinedBehaviorSanitizer), ubsan (UBSan alone) or
# tsan (ThreadSanitizer, with abseil and gRPC built under it:
# scripts/tsan_libs.sh).
#   scripts/sanitize.sh asan|ubsan|tsan [//targets...] [bazel test args]
# Without targets every test runs (`make test-asan`, `make test-ubsan`,
# `make test-tsan`:
# several times longer than make test); scripts/test.sh runs a chosen
# subset of each this way (docs/TESTING.md).
set -uo pipefail
cd "$(dirname "$0")/.."
config="${1:?usage: scripts/sanitize.sh asan|ubsan|tsan [//targets...] [bazel test args]}"
shift
targets=() args=()
for a in "$@"; do
  case "$a" in
    //*) targets+=("$a") ;;
    *) args+=("$a") ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(//...)
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
MODEL="${BRAID_MODEL:-$(scripts/fetch_model.sh)}"
env=(--test_env=BRAID_MODEL="$MODEL" --test_env=BRAID_PYTHON="$CACHE/venv/bin/python"
  --test_env=BRAID_CACHE="$CACHE"
  --test_env=BRAID_KQUANT_DIR="${BRAID_KQUANT_DIR:-$CACHE/models/kquant}"
  --test_env=BRAID_ARCH_DIR="${BRAID_ARCH_DIR:-$CACHE/models/arch}")
case "$config" in
  asan | ubsan) ;;
  tsan)
    lib="$(scripts/tsan_libs.sh)" || {
      echo "sanitize.sh: could not build abseil and gRPC under ThreadSanitizer (see above)" >&2
      exit 1
    }
    env+=(--test_env=LD_LIBRARY_PATH="$lib"
      --test_env=TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/sanitizers/tsan.supp") ;;
  *) echo "sanitize.sh: unknown sanitizer $config (asan, ubsan or tsan)" >&2; exit 2 ;;
esac
exec bazel test --config="$config" "${targets[@]}" "${env[@]}" "${args[@]}"
