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

# What the tests that need the model or the Python clients read.
test_env=(--test_env=BRAID_MODEL="$MODEL"
          --test_env=BRAID_PYTHON="$CACHE/venv/bin/python"
          --test_env=BRAID_CACHE="$CACHE")
bazel test //... "${test_env[@]}" "$@"
rc=$?

# The CUDA executor (docs/TESTING.md "CUDA"): every CUDA target built with
# nvcc for sm_80/86/89/90a under --config=cuda (its own output tree), braidd
# with --device=cuda among them; the host-side tests that link the CUDA
# runtime (tag "cuda") run here; the "gpu" ones need a device and only build
# (tools/gpu/check.sh runs them on a GPU machine).
cuda_tests=""
if [ -x "${BRAID_NVCC:-/usr/local/cuda/bin/nvcc}" ]; then
  gpu_targets="$(bazel query 'attr(tags, "\bgpu\b", //...)' 2>/dev/null)"
  cuda_tests="$(bazel query 'tests(attr(tags, "\bcuda\b", //...))' 2>/dev/null)"
  bazel build --config=cuda //server:braidd $gpu_targets "$@" &&
    bazel test --config=cuda $cuda_tests "${test_env[@]}" "$@"
  cuda_rc=$?
  [ "$rc" -ne 0 ] || rc=$cuda_rc
else
  echo "test: no CUDA toolkit (/usr/local/cuda/bin/nvcc): the CUDA executor was not built; install CUDA 12.8+ to build it"
fi

# The engine, scheduler, session, front-end and HTTP tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer (--config=asan, its own
# output tree; docs/TESTING.md); their cases count too.
ASAN_TARGETS=(
  //batching:engine_test //batching:engine_session_test //batching:scheduler_test
  //batching:session_scheduler_test //batching:session_keep_test
  //frontend:request_builder_test //openai:api_test //tools/cli:args_test
  //tests/e2e:openai_test //tests/e2e:http_bad_input_test
)
BRAID_MODEL="$MODEL" BRAID_CACHE="$CACHE" scripts/sanitize.sh asan "${ASAN_TARGETS[@]}" "$@"
asan_rc=$?
[ "$rc" -ne 0 ] || rc=$asan_rc

# The engine, scheduler, session and server tests under ThreadSanitizer
# (--config=tsan) with abseil and gRPC built under it too
# (scripts/tsan_libs.sh, once: about 18 minutes on two cores), so
# absl::Mutex's ordering and gRPC's hand-offs are seen; the daemon's gRPC
# end-to-end and session suites run on a braidd built so. Any report fails.
TSAN_TARGETS=(
  //batching:engine_test //batching:engine_session_test //batching:scheduler_test
  //batching:session_scheduler_test //batching:session_keep_test
  //queues:work_queues_test //frontend:load_report_test //server:watchdog_test
  //server:agent_check_test //server:session_streams_test //server:stats_test
  //tests/e2e:e2e_test //tests/e2e:session_test
)
BRAID_MODEL="$MODEL" BRAID_CACHE="$CACHE" scripts/sanitize.sh tsan "${TSAN_TARGETS[@]}" "$@"
tsan_rc=$?
[ "$rc" -ne 0 ] || rc=$tsan_rc

# libFuzzer targets (clang, --config=fuzz), each for a fixed number of inputs
# from its committed seed corpus (tests/fuzz).
FUZZ_TARGETS=(//tests/fuzz:openai_request_fuzz_test //tests/fuzz:gguf_fuzz_test
  //tests/fuzz:text_fuzz_test //tests/fuzz:grpc_request_fuzz_test
  //tests/fuzz:session_action_fuzz_test)
bazel test --config=fuzz "${FUZZ_TARGETS[@]}" "$@"
fuzz_rc=$?
[ "$rc" -ne 0 ] || rc=$fuzz_rc

# Only the test targets that exist now (the testlogs keep old ones); each
# configuration's logs are in its own output tree.
targets="$(bazel query 'tests(//...) except attr(tags, manual, //...)' 2>/dev/null)"
logs="$(bazel info output_path 2>/dev/null)"
python3 - "$rc" "$logs" $targets "--asan" "${ASAN_TARGETS[@]}" "--tsan" "${TSAN_TARGETS[@]}" \
    "--fuzz" "${FUZZ_TARGETS[@]}" "--cuda" $cuda_tests <<'PY'
import os, sys, xml.etree.ElementTree as ET
rc, logs = int(sys.argv[1]), sys.argv[2]
args = sys.argv[3:]
a, t, f, c = (args.index(x) for x in ("--asan", "--tsan", "--fuzz", "--cuda"))
runs = [("k8-fastbuild", args[:a]), ("k8-fastbuildasan", args[a + 1:t]),
        ("k8-fastbuildtsan", args[t + 1:f]), ("k8-fastbuildfuzz", args[f + 1:c]),
        ("k8-fastbuildcuda", args[c + 1:])]
passed = failed = 0
for tree, targets in runs:
  for target in targets:
    path = os.path.join(logs, tree, "testlogs", target.lstrip("/").replace(":", "/"), "test.xml")
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
