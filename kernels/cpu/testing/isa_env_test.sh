#!/usr/bin/env bash
# BRAID_CPU_ISA pins the kernels' level: scalar and avx2 are taken (avx2 only
# where the CPU has it), native is the CPU's own, and an unknown value stops
# the process with exit status 2 and a message naming the accepted ones.
set -uo pipefail
probe="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
native="$("$probe")" || fail "probe failed"
[ "$(BRAID_CPU_ISA=scalar "$probe")" = scalar ] || fail "scalar not taken"
[ "$(BRAID_CPU_ISA=native "$probe")" = "$native" ] || fail "native differs"
if [ "$native" != scalar ]; then
  [ "$(BRAID_CPU_ISA=avx2 "$probe")" = avx2 ] || fail "avx2 not taken"
fi
out="$(BRAID_CPU_ISA=sse9 "$probe" 2>&1)"; rc=$?
[ "$rc" = 2 ] || fail "unknown level exited $rc"
echo "$out" | grep -q "scalar, avx2" || fail "message does not name the levels: $out"
echo "PASS: native=$native"
