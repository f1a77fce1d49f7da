#!/usr/bin/env bash
# The end-to-end part of the GPU check (issue 32), run on the GPU machine by
# tools/gpu/check.sh from the repository root, .gpu/ carried (prepare.sh):
#   tools/gpu/e2e.sh OUTDIR
# Writes a random-weight model of SmolLM2-135M's shape (untied embeddings:
# greedy outputs that do not just repeat a token) with the carried
# tokenizer (.gpu/tokenizer.gguf: the machine has no model), serves it with
# two braidd, --device=cpu (the oracle) and --device=cuda, and runs gpu_e2e
# (tools/gpu/e2e_client.cc) against them: greedy outputs compared, a session
# with appends and four branches, a cancelled generation and the KV blocks
# it frees. Writes OUTDIR/e2e.json and the daemons' logs; exits with
# gpu_e2e's status (2 when a daemon cannot start).
#
# E2E_SECOND_DEVICE=cpu serves the second daemon on the CPU too, with
# gpu_e2e --expect_backend=cpu: a run of this script and the client on a
# machine without a GPU. E2E_THREADS sets the CPU daemons' --threads.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: tools/gpu/e2e.sh OUTDIR}"
mkdir -p "$out"
root=.gpu
second="${E2E_SECOND_DEVICE:-cuda}"
threads="${E2E_THREADS:-0}"
export LD_LIBRARY_PATH="$PWD/$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
work=$(mktemp -d /tmp/braid_e2e.XXXXXX)
pids=()
cleanup() {
  trap '' TERM INT  # timeout signals its whole process group, maybe twice
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # check.sh's timeout: the daemons go too

t0=$(date +%s)
if ! timeout 120 "$root/bin/model/testing/write_random_llama" \
    --out="$work/model.gguf" --tokenizer_from="$root/tokenizer.gguf" \
    --shape=smollm2-135m --untied_embeddings --fast_weights; then
  echo "e2e: write_random_llama failed" >&2
  exit 2
fi
echo "e2e: model written in $(( $(date +%s) - t0 )) s"

# start NAME DEVICE: braidd on a free loopback port, its port in $work/NAME.port.
start() {
  "$root/bin/server/braidd" --model="$work/model.gguf" --device="$2" \
    --threads="$threads" --listen=127.0.0.1:0 --port_file="$work/$1.port" \
    --metrics_listen= --stats_file="$work/$1.stats" \
    --kv_budget_tokens=16384 --drain_grace_seconds=2 \
    >"$out/e2e_braidd_$1.log" 2>&1 &
  pids+=($!)
}
start cpu cpu
start cuda "$second"
for name in cpu cuda; do
  for _ in $(seq 1200); do
    [ -s "$work/$name.port" ] && break
    sleep 0.1
  done
  if [ ! -s "$work/$name.port" ]; then
    echo "e2e: the $name daemon did not listen; its log:" >&2
    tail -20 "$out/e2e_braidd_$name.log" >&2
    exit 2
  fi
done

# In the background, so that a TERM reaches the trap while it runs; a
# watcher ends it should a daemon exit (a failed load) before it is done.
timeout 300 "$root/bin/tools/gpu/gpu_e2e" \
  --cpu="127.0.0.1:$(cat "$work/cpu.port")" \
  --cuda="127.0.0.1:$(cat "$work/cuda.port")" \
  --cuda_stats="$work/cuda.stats" --expect_backend="$second" \
  --out="$out/e2e.json" &
client=$!
pids+=($client)
(
  while kill -0 "${pids[0]}" 2>/dev/null && kill -0 "${pids[1]}" 2>/dev/null; do
    sleep 0.5
  done
  kill -TERM "$client" 2>/dev/null
) &
pids+=($!)
wait $client
rc=$?
for i in 0 1; do
  name=$([ $i = 0 ] && echo cpu || echo cuda)
  if ! kill -0 "${pids[$i]}" 2>/dev/null; then
    echo "e2e: the $name daemon exited; its log:" >&2
    tail -20 "$out/e2e_braidd_$name.log" >&2
    rc=2
  fi
done
[ $rc = 124 ] && echo "e2e: gpu_e2e timed out" >&2
exit $rc
