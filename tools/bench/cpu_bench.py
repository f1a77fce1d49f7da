#!/usr/bin/env python3
"""CPU executor against llama.cpp, in one run on one machine.

Runs braid's C++ driver (//model/cpu:llama_bench: LlamaModel::Forward over a paged
KV pool, in-process) and llama.cpp (llama-cpp-python, in-process) on the same
GGUF with the same thread count, alternating them --rounds times so that load
from other processes hits both alike, and prints each figure and the ratios:

  prefill       one sequence of --prefill tokens in one call (tok/s)
  decode1       one sequence, --decode greedy tokens after a --prompt-token
                prompt (27; longer for long-context decode, with --kv_tokens
                at least (--prompt + --decode) x (--seqs + 1))
  decodeN       --seqs sequences decoding in one batch per step, aggregate
                tok/s, and each one's ratio to its own decode1; braid's again
                in a second driver run with one stream's and the batch's
                steps alternating (--interleave), so both come from the same
                minutes: a VM's speed can drift by 20-30% between phases,
                the one-stream and batched steps not alike
  rss           braid: VmRSS of the driver process holding the model and a
                --kv_tokens paged KV pool; llama.cpp: VmRSS with n_ctx =
                --kv_tokens
  bandwidth     bytes one decode step reads (weights + K/V of the context) x
                decode steps/s, as a fraction of the machine's streaming read
                bandwidth measured by the driver in the same run

Needs: bazel build //model/cpu:llama_bench; pip install llama-cpp-python.
Usage: tools/bench/cpu_bench.py [--model M] [--threads T] [--rounds R]
       [--braid_bench PATH] [--convert f16|bf16|f32|q4_0|q8_0]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from machine import cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# llama.cpp through llama-cpp-python's bindings of its C API, as llama.cpp's own
# tools drive it: contexts with llama.cpp's default parameters (flash
# attention "auto": on for this CPU backend), the same token ids as
# llama_bench, greedy argmax of the logits llama_decode returns. (The `Llama`
# class, used before, turns flash attention off unless asked and adds its
# eval() bookkeeping: about 17% slower one stream; docs/perf-log.)
# decodeN: --seqs sequences in one llama_batch per step, each its own seq_id
# in a context with n_seq_max = --seqs and llama.cpp's default per-sequence
# KV (kv_unified off: 10% faster at 8 sequences than one shared cache there).
# rss: after the one-sequence context with n_ctx = --kv_tokens, before the
# batched one.
LLAMA_CHILD = r"""
import json, sys, time
import numpy as np
import llama_cpp as L
(model, threads, n_prefill, n_prompt, n_decode, n_seqs, reps,
 n_ctx) = sys.argv[1:9]
threads, n_prefill, n_prompt, n_decode, n_seqs, reps, n_ctx = map(
    int, (threads, n_prefill, n_prompt, n_decode, n_seqs, reps, n_ctx))
L.llama_backend_init()
t0 = time.time()
mdl = L.llama_model_load_from_file(model.encode(),
                                   L.llama_model_default_params())
assert mdl, "llama.cpp could not load " + model
def context(n_seq):
    p = L.llama_context_default_params()
    # n_batch: the longest call (llama.cpp splits it into 512-token ubatches).
    p.n_ctx, p.n_ubatch, p.n_seq_max = n_ctx, 512, n_seq
    p.n_batch = max(512, n_prefill, n_prompt)
    p.n_threads = p.n_threads_batch = threads
    ctx = L.llama_init_from_model(mdl, p)
    assert ctx, "llama.cpp could not make a context"
    return ctx
ctx = context(1)
load = time.time() - t0
nv = L.llama_vocab_n_tokens(L.llama_model_get_vocab(mdl))
batch = L.llama_batch_init(max(n_prefill, n_prompt, n_seqs), 0, 1)
def decode(tokens, pos, seqs, last_only):
    batch.n_tokens = len(tokens)
    for i, (t, p, s) in enumerate(zip(tokens, pos, seqs)):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, p, 1
        batch.seq_id[i][0] = s
        batch.logits[i] = not last_only or i == len(tokens) - 1
    rc = L.llama_decode(ctx, batch)
    assert rc == 0, f"llama_decode: {rc}"
    L.llama_synchronize(ctx)
def greedy(i):
    return int(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i),
                                     shape=(nv,)).argmax())
def prompt_all(n):  # the prompt into sequences 0..n-1; their next tokens
    nxt = []
    for s in range(n):
        decode(prompt, range(n_prompt), [s] * n_prompt, True)
        nxt.append(greedy(n_prompt - 1))
    return nxt
def steps(nxt):  # seconds of n_decode greedy steps of len(nxt) sequences
    n = len(nxt)
    t = time.time()
    for j in range(n_decode):
        decode(nxt, [n_prompt + j] * n, range(n), False)
        nxt = [greedy(i) for i in range(n)]
    return time.time() - t
clear = lambda: L.llama_memory_clear(L.llama_get_memory(ctx), True)
# The same token ids as llama_bench.
prefill = [(i * 7919 + 13) % nv for i in range(n_prefill)]
prompt = [(i * 104729 + 7) % nv for i in range(n_prompt)]
best_p = best_d = best_n = 1e9
for _ in range(reps):
    clear()
    t = time.time()
    decode(prefill, range(n_prefill), [0] * n_prefill, True)
    best_p = min(best_p, time.time() - t)
    clear()
    best_d = min(best_d, steps(prompt_all(1)))
rss = 0
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        rss = int(line.split()[1]) / 1024
L.llama_free(ctx)
ctx = context(n_seqs)
for _ in range(reps):
    clear()
    best_n = min(best_n, steps(prompt_all(n_seqs)))
print(json.dumps(dict(load_s=load, prefill_tps=n_prefill / best_p,
                      decode1_tps=n_decode / best_d,
                      decodeN_tps=n_seqs * n_decode / best_n, rss_mib=rss)))
"""


def run_braid(a):
    def bench(extra):
        out = subprocess.run(
            [a.braid_bench, f"--model={a.model}", f"--threads={a.threads}",
             f"--prompt={a.prompt}", f"--decode={a.decode}", f"--seqs={a.seqs}",
             f"--kv_tokens={a.kv_tokens}", f"--reps={a.reps}"]
            + extra + a.braid_flag,
            capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr[-2000:])
            sys.exit(f"cpu_bench: llama_bench exited with {out.returncode}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    b = bench([f"--prefill={a.prefill}"])
    # One stream and the batch with their steps alternating (a short
    # prefill phase leaves the pool room for the extra sequence).
    i = bench(["--prefill=16", "--interleave"])
    b["interleaved_decode1_tps"] = i["interleaved_decode1_tps"]
    b["interleaved_decodeN_tps"] = i["interleaved_decodeN_tps"]
    return b


# llama-cpp-python 0.3.36 built for the machine (-march=native) takes ggml's
# AMX path on CPUs with AMX-INT8, and that path crashed on the first matrix
# product on a 2-vCPU Xeon (ggml-org/llama.cpp#20824, closed unfixed). Built without it, llama.cpp runs its AVX-512 VNNI kernels.
NO_AMX_BUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON '
    '-DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON '
    '-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" '
    'pip install --force-reinstall --no-deps --no-cache-dir '
    'llama-cpp-python==0.3.36')


def run_llama(a):
    out = subprocess.run(
        [sys.executable, "-c", LLAMA_CHILD, a.model, str(a.threads),
         str(a.prefill), str(a.prompt), str(a.decode), str(a.seqs), str(a.reps),
         str(a.kv_tokens)],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-2000:])
        hint = ""
        if out.returncode < 0 and "amx_int8" in open("/proc/cpuinfo").read():
            hint = ("\nThis CPU has AMX-INT8, whose ggml path crashes "
                    "(ggml-org/llama.cpp#20824); reinstall llama-cpp-python "
                    "without it:\n  " + NO_AMX_BUILD)
        sys.exit(f"cpu_bench: llama.cpp (llama-cpp-python) exited with "
                 f"{out.returncode}{hint}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=27,
                    help="context tokens before the decode phases")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--kv_tokens", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=3, help="best-of within a round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--braid_bench", default=os.path.join(
        ROOT, "bazel-bin", "model", "cpu", "llama_bench"),
        help="the llama_bench binary (e.g. a copy built from another commit)")
    ap.add_argument("--braid_flag", action="append", default=[],
                    help="extra llama_bench flag, repeatable (e.g. "
                    "--braid_flag=--packed_matmul)")
    ap.add_argument("--convert", choices=["f16", "bf16", "f32", "q4_0", "q8_0"],
                    help="run both on a copy of --model with its quantized "
                    "matrices in this type (tools/gguf_convert.py; written "
                    "to a temporary file)")
    a = ap.parse_args()
    if a.convert:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, f"{a.convert}.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools",
                                                     "gguf_convert.py"),
                        a.model, path, a.convert], check=True)
        a.model = path
    rounds = []
    for r in range(a.rounds):
        b, l = run_braid(a), run_llama(a)
        rounds.append((b, l))
        print(f"round {r + 1}: braid prefill {b['prefill_tps']:.1f} decode1 "
              f"{b['decode1_tps']:.1f} decode{a.seqs} {b['decodeN_tps']:.1f} | "
              f"llama.cpp prefill {l['prefill_tps']:.1f} decode1 "
              f"{l['decode1_tps']:.1f} decode{a.seqs} {l['decodeN_tps']:.1f} | "
              f"read {b['read_gbps']:.1f} GB/s, "
              f"handoff {b.get('handoff_ns', 0):.0f} ns",
              flush=True)
    med = lambda xs: statistics.median(xs)
    ratio = lambda k: med([b[k] / l[k] for b, l in rounds])
    B = {k: med([b[k] for b, _ in rounds]) for k in rounds[0][0]
         if not isinstance(rounds[0][0][k], str)}
    L = {k: med([l[k] for _, l in rounds]) for k in rounds[0][1]}
    step_bytes = B["weight_bytes"] + B["kv_bytes_per_step"]
    bw_frac = med([(b["weight_bytes"] + b["kv_bytes_per_step"]) *
                   b["decode1_tps"] / 1e9 / b["read_gbps"] for b, _ in rounds])
    print()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs), braid kernels "
          f"{rounds[0][0].get('isa', '?')} (BRAID_CPU_ISA pins a lower level), "
          f"threads {a.threads}, "
          f"model {os.path.basename(a.model)}, prompt {a.prompt}, "
          f"median of {a.rounds} rounds, "
          f"braid flags {' '.join(a.braid_flag) or '(none)'}")
    print(f"{'metric':<34}{'braid':>10}{'llama.cpp':>11}{'ratio':>9}")
    print(f"{'prefill %d (tok/s)' % a.prefill:<34}{B['prefill_tps']:>10.1f}"
          f"{L['prefill_tps']:>11.1f}{ratio('prefill_tps'):>8.2f}x")
    print(f"{'decode 1 stream %d tok (tok/s)' % a.decode:<34}"
          f"{B['decode1_tps']:>10.1f}{L['decode1_tps']:>11.1f}"
          f"{ratio('decode1_tps'):>8.2f}x")
    print(f"{'decode %d seqs aggregate (tok/s)' % a.seqs:<34}"
          f"{B['decodeN_tps']:>10.1f}{L['decodeN_tps']:>11.1f}"
          f"{ratio('decodeN_tps'):>8.2f}x")
    agg = [med([x["decodeN_tps"] / x["decode1_tps"] for x in side])
           for side in zip(*rounds)]
    print(f"{'  over its own 1 stream':<34}{agg[0]:>9.2f}x{agg[1]:>10.2f}x")
    inter = [b["interleaved_decodeN_tps"] / b["interleaved_decode1_tps"]
             for b, _ in rounds]
    print(f"{'  steps interleaved with 1 stream':<34}"
          f"{B['interleaved_decodeN_tps']:>10.1f}{'-':>11}"
          f"{med(inter):>8.2f}x of 1 stream at "
          f"{B['interleaved_decode1_tps']:.1f} (rounds "
          + " / ".join(f"{x:.2f}" for x in inter) + ")")
    print(f"{'resident memory (MiB)':<34}{B['rss_mib']:>10.1f}"
          f"{L['rss_mib']:>11.1f}{B['rss_mib'] / L['rss_mib']:>8.2f}x")
    print(f"{'  of which braid KV pool (MiB)':<34}{B['kv_pool_mib']:>10.1f}")
    print(f"{'bytes per decode step (MB)':<34}{step_bytes / 1e6:>10.1f}")
    print(f"{'read bandwidth (GB/s)':<34}{B['read_gbps']:>10.1f}")
    print(f"{'CPU 0 <-> 1 handoff (ns)':<34}{B.get('handoff_ns', 0):>10.0f}"
          "   (~100: one core complex; ~400: two, batched ratios lower)")
    print(f"{'decode bandwidth efficiency':<34}{100 * bw_frac:>9.1f}%"
          f"{100 * bw_frac * L['decode1_tps'] / B['decode1_tps']:>10.1f}%")


if __name__ == "__main__":
    main()
