#!/usr/bin/env python3
"""One greedy stream, braid against llama.cpp, in one run on one machine.

Measures for each engine, on the same GGUF with the same thread count:
  - model load time (braidd: from its start to serving, as it logs it;
    llama.cpp: the Llama() constructor in llama-cpp-python),
  - prefill tokens/s of the prompt and decode tokens/s of N greedy tokens
    (braid: through the real daemon over gRPC, from the final message's
    timings; llama.cpp: eval() calls in-process, no server overhead),
  - resident memory (VmRSS of the serving process after generating).

Needs: bazel build //server:braidd, and the venv python with grpcio,
grpcio-tools and llama-cpp-python (pip install llama-cpp-python).

Usage: tools/bench/single_stream.py [--model M] [--threads T] [--tokens N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

PROMPT = ("<|im_start|>user\nWrite a long, detailed story about a lighthouse "
          "keeper who finds a message in a bottle.<|im_end|>\n"
          "<|im_start|>assistant\n")


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_braid(model, threads, n):
    import grpc
    os.chdir(ROOT)
    pb, pb_grpc = harness.load_stubs()
    os.environ["BRAID_MODEL"] = model
    t0 = time.time()
    # A 4096-token KV pool, as llama.cpp's n_ctx below.
    d = harness.Daemon(f"--threads={threads}", "--context_length=4096",
                       "--kv_budget_tokens=4096")
    log = d.read_log()
    m = re.search(r"loaded .* in ([0-9.]+) s", log)
    load = float(m.group(1)) if m else time.time() - t0
    stub = pb_grpc.BraidStub(grpc.insecure_channel(d.addr))
    req = pb.GenerateRequest(prompt=pb.Prompt(text=PROMPT.encode()),
                             sampling=pb.SamplingParams(max_tokens=n,
                                                        ignore_eos=True))
    # Warm up with another prompt, so the measured one is not served from
    # the prefix cache.
    warm = pb.GenerateRequest(prompt=pb.Prompt(text=b"Warm-up: say hello."),
                              sampling=pb.SamplingParams(max_tokens=8))
    list(stub.Generate(warm))
    final = list(stub.Generate(req))[-1].final
    t = final.timings
    prefill_tps = final.usage.prompt_tokens / t.time_to_first_token_seconds
    decode_tps = (final.usage.output_tokens - 1) / (
        t.total_seconds - t.time_to_first_token_seconds)
    rss = rss_mb(d.proc.pid)
    d.stop()
    return dict(load_s=load, prefill_tps=prefill_tps, decode_tps=decode_tps,
                rss_mb=rss, prompt_tokens=final.usage.prompt_tokens)


LLAMA_CHILD = r"""
import json, sys, time
import numpy as np
from llama_cpp import Llama
model, threads, n, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t0 = time.time()
llm = Llama(model_path=model, n_ctx=4096, n_threads=threads, n_batch=512, verbose=False)
load = time.time() - t0
ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
def run():
    llm.reset()
    t0 = time.time()
    llm.eval(ids)
    t1 = time.time()
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    for _ in range(n - 1):
        llm.eval([tok])
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    t2 = time.time()
    return len(ids) / (t1 - t0), (n - 1) / (t2 - t1)
run()
prefill, decode = run()
rss = 0
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        rss = int(line.split()[1]) / 1024
print(json.dumps(dict(load_s=load, prefill_tps=prefill, decode_tps=decode, rss_mb=rss)))
"""


def bench_llama(model, threads, n):
    out = subprocess.run([sys.executable, "-c", LLAMA_CHILD, model,
                          str(threads), str(n), PROMPT],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    braid = bench_braid(args.model, args.threads, args.tokens)
    llama = bench_llama(args.model, args.threads, args.tokens)
    print(f"model {os.path.basename(args.model)}, threads {args.threads}, "
          f"prompt {braid['prompt_tokens']} tokens, decode {args.tokens} tokens")
    print(f"{'metric':<22}{'braid':>12}{'llama.cpp':>12}{'braid/llama':>13}")
    for key, name, better_high in [("load_s", "load time (s)", False),
                                   ("prefill_tps", "prefill (tok/s)", True),
                                   ("decode_tps", "decode (tok/s)", True),
                                   ("rss_mb", "resident memory (MB)", False)]:
        b, l = braid[key], llama[key]
        print(f"{name:<22}{b:>12.2f}{l:>12.2f}{b / l:>12.2f}x")
    print("note: braid is measured through braidd over gRPC; llama.cpp in-process")


if __name__ == "__main__":
    main()
