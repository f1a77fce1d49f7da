#!/usr/bin/env python3
"""Load generator for braid (gRPC) and OpenAI-compatible HTTP servers.

Drives either backend with the same workload and reports vLLM's serving
metrics (TTFT, TPOT, ITL, E2E latency, throughput, goodput; definitions in
metrics.py) as a readable table and, with --json, as a JSON file holding the
summary and every request's record.

Workload:
  --concurrency N     at most N requests in flight (default: unlimited)
  --request-rate R    Poisson arrivals at R requests/s (default: inf = all at
                      once, limited by --concurrency)
  --num-prompts K     requests in the run
  --prompt-len L / --output-len O
                      random prompts of exactly L token ids (fixed --seed,
                      ids drawn from [--min-token-id, --vocab-size)), sent as
                      token ids to both backends so prompt lengths match
                      exactly; every request generates exactly O tokens
                      (greedy, ignore_eos)
  --prompt-file F     text prompts instead: one per line, or a .jsonl file
                      of {"prompt": ..., "output_len": ...} objects; cycled
                      when shorter than --num-prompts
  --scenario isolation
                      the stream-isolation scenario instead (see isolation()):
                      N streams decode; a long prompt arrives; ITL p99 of the
                      streams during its prefill against a window without it

Examples:
  loadgen.py --backend braid --addr 127.0.0.1:50051 --concurrency 4 \
      --num-prompts 16 --prompt-len 256 --output-len 128 --json out.json
  loadgen.py --backend openai --base-url http://127.0.0.1:8080 --concurrency 4 ...
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metrics  # noqa: E402
from backends import BraidBackend, OpenAIBackend, Request  # noqa: E402
from metrics import RequestResult  # noqa: E402


def random_requests(n: int, prompt_len: int, output_len: int, seed: int,
                    vocab_size: int = 49152, min_token_id: int = 256) -> List[Request]:
    """n prompts of prompt_len random token ids; equal seeds give equal prompts."""
    rng = random.Random(seed)
    return [Request(prompt_ids=[rng.randrange(min_token_id, vocab_size)
                                for _ in range(prompt_len)],
                    output_len=output_len) for _ in range(n)]


def file_requests(path: str, n: int, output_len: int) -> List[Request]:
    items = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if path.endswith(".jsonl"):
                obj = json.loads(line)
                items.append(Request(prompt_text=obj["prompt"],
                                     output_len=int(obj.get("output_len", output_len))))
            else:
                items.append(Request(prompt_text=line, output_len=output_len))
    if not items:
        raise SystemExit(f"no prompts in {path}")
    return [items[i % len(items)] for i in range(n)]


def make_backend(args):
    if args.backend == "braid":
        return BraidBackend(args.addr, getattr(args, "proto", None))
    return OpenAIBackend(args.base_url, args.endpoint, args.model)


def arrival_delays(n: int, rate: float, seed: int) -> List[float]:
    """Inter-arrival gaps: exponential (Poisson process) at `rate`, or 0s."""
    if rate == float("inf") or rate <= 0:
        return [0.0] * n
    rng = random.Random(seed + 1)
    return [rng.expovariate(rate) for _ in range(n)]


async def run_benchmark(backend, requests: Sequence[Request],
                        concurrency: Optional[int] = None,
                        request_rate: float = float("inf"), seed: int = 0,
                        slo_ttft_ms=None, slo_tpot_ms=None, slo_e2el_ms=None,
                        percentiles=(50, 90, 99)) -> Dict:
    """Sends `requests` like vLLM's benchmark: Poisson arrivals (or all at
    once) and at most `concurrency` in flight; returns summary + records."""
    sem = asyncio.Semaphore(concurrency) if concurrency else None
    results = [RequestResult() for _ in requests]

    async def one(i):
        if sem is None:
            return await backend.generate(requests[i], results[i])
        async with sem:
            return await backend.generate(requests[i], results[i])

    delays = arrival_delays(len(requests), request_rate, seed)
    t0 = time.perf_counter()
    tasks = []
    for i, d in enumerate(delays):
        if d:
            await asyncio.sleep(d)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    duration = time.perf_counter() - t0
    summary = metrics.summarize(results, duration, slo_ttft_ms, slo_tpot_ms,
                                slo_e2el_ms, percentiles)
    summary["concurrency"] = concurrency
    summary["request_rate"] = request_rate if request_rate != float("inf") else "inf"
    return {"summary": summary,
            "errors": sorted({r.error for r in results if r.error}),
            "requests": [r.to_json() for r in results]}


async def isolation(backend, streams: int = 4, stream_prompt_len: int = 64,
                    stream_output_len: int = 1536, long_prompt_len: int = 2000,
                    long_output_len: int = 8, steady_tokens: int = 16,
                    baseline_s: float = 3.0, tail_s: float = 0.5, seed: int = 7,
                    timeout_s: float = 600.0) -> Dict:
    """Stream isolation: do decoding streams stall while a long prompt prefills?

    1. Start `streams` requests (short prompts, long outputs) and wait until
       each has received `steady_tokens` tokens (steady decoding).
    2. Baseline: record for `baseline_s` seconds; the streams' ITL gaps lying
       entirely in this window are the baseline.
    3. Send one `long_prompt_len`-token prompt. The prefill window runs from
       sending it to its first output token. The streams' gaps that overlap
       this window (every gap the prefill could have lengthened) are the
       prefill sample.
    4. Cancel the streams `tail_s` after the long request's first token.
    Result: ITL p50/p99 for both windows and p99(prefill) / p99(baseline).
    """
    reqs = random_requests(streams, stream_prompt_len, stream_output_len, seed)
    long_req = random_requests(1, long_prompt_len, long_output_len, seed + 100)[0]
    res = [RequestResult() for _ in reqs]
    tasks = [asyncio.create_task(backend.generate(r, x)) for r, x in zip(reqs, res)]
    deadline = time.perf_counter() + timeout_s

    def running():
        return all(not t.done() for t in tasks)

    while (running() and time.perf_counter() < deadline and
           min(sum(x.chunk_tokens) for x in res) < steady_tokens):
        await asyncio.sleep(0.01)
    t_base = time.perf_counter()
    await asyncio.sleep(baseline_s)
    long_res = RequestResult()
    long_task = asyncio.create_task(backend.generate(long_req, long_res))
    while not long_res.chunk_times and not long_task.done():
        if time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.005)
    t_send = long_res.start
    t_first = long_res.chunk_times[0] if long_res.chunk_times else time.perf_counter()
    await asyncio.sleep(tail_s)
    streams_alive = running()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await long_task

    base = metrics.gaps_in_window(res, t_base, t_send, overlap=False)
    during = metrics.gaps_in_window(res, t_send, t_first, overlap=True)
    p99_base = metrics.percentile(base, 99)
    p99_during = metrics.percentile(during, 99)
    errors = sorted({x.error for x in res + [long_res] if x.error})
    return {
        "streams": streams,
        "long_prompt_tokens": long_res.prompt_tokens,
        "prefill_window_s": t_first - t_send,
        "baseline_window_s": t_send - t_base,
        "baseline_gaps": len(base),
        "prefill_gaps": len(during),
        "baseline_itl_p50_ms": metrics.percentile(base, 50) * 1000,
        "baseline_itl_p99_ms": p99_base * 1000,
        "prefill_itl_p50_ms": metrics.percentile(during, 50) * 1000,
        "prefill_itl_p99_ms": p99_during * 1000,
        "prefill_itl_max_ms": max(during, default=0.0) * 1000,
        "itl_p99_ratio": (p99_during / p99_base) if p99_base > 0 else None,
        "long_request_ok": long_res.ok,
        "streams_decoding_throughout": streams_alive and not errors,
        "errors": errors,
    }


def format_isolation(title: str, r: Dict) -> str:
    ratio = r["itl_p99_ratio"]
    lines = [f"{' ' + title + ' ':=^52}",
             f"{'long prompt tokens:':<40}{r['long_prompt_tokens']:>12}",
             f"{'prefill window (s):':<40}{r['prefill_window_s']:>12.2f}",
             f"{'baseline ITL p50 / p99 (ms):':<36}"
             f"{r['baseline_itl_p50_ms']:>7.1f} /{r['baseline_itl_p99_ms']:>7.1f}",
             f"{'during prefill ITL p50 / p99 (ms):':<36}"
             f"{r['prefill_itl_p50_ms']:>7.1f} /{r['prefill_itl_p99_ms']:>7.1f}",
             f"{'ITL p99 ratio (goal <= 2x):':<40}"
             f"{('%.2fx' % ratio) if ratio is not None else 'n/a':>12}"]
    if not r["streams_decoding_throughout"]:
        lines.append("WARNING: a stream ended or failed before the window closed: "
                     + "; ".join(r["errors"]))
    lines.append("=" * 52)
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["braid", "openai"], default="braid")
    p.add_argument("--addr", default="127.0.0.1:50051", help="braidd host:port")
    p.add_argument("--proto", default=None, help="braid.proto (default: the repo's)")
    p.add_argument("--base-url", default="http://127.0.0.1:8080",
                   help="OpenAI-compatible server")
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None,
                   help="'model' field for OpenAI servers (default: none sent, "
                        "which braidd and llama-server take as their model)")
    p.add_argument("--scenario", choices=["serve", "isolation"], default="serve")
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--prompt-file", default=None)
    p.add_argument("--vocab-size", type=int, default=49152)
    p.add_argument("--min-token-id", type=int, default=256,
                   help="random ids start here (skips special tokens)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=1,
                   help="requests sent (and not measured) before the run")
    p.add_argument("--slo-ttft", type=float, default=None, help="goodput SLO, ms")
    p.add_argument("--slo-tpot", type=float, default=None, help="goodput SLO, ms")
    p.add_argument("--slo-e2el", type=float, default=None, help="goodput SLO, ms")
    p.add_argument("--percentiles", default="50,90,99")
    p.add_argument("--long-prompt-len", type=int, default=2000,
                   help="isolation: the arriving prompt's length")
    p.add_argument("--streams", type=int, default=4, help="isolation: decoding streams")
    p.add_argument("--json", default=None, help="write the results here")
    return p.parse_args(argv)


async def amain(args) -> Dict:
    backend = make_backend(args)
    try:
        if args.warmup:
            warm = random_requests(args.warmup, 16, 8, args.seed + 999,
                                   args.vocab_size, args.min_token_id)
            await run_benchmark(backend, warm, concurrency=1)
        if args.scenario == "isolation":
            r = await isolation(backend, streams=args.streams,
                                long_prompt_len=args.long_prompt_len, seed=args.seed)
            print(format_isolation(f"{args.backend} stream isolation", r))
            out = {"scenario": "isolation", "result": r}
        else:
            if args.prompt_file:
                reqs = file_requests(args.prompt_file, args.num_prompts, args.output_len)
            else:
                reqs = random_requests(args.num_prompts, args.prompt_len,
                                       args.output_len, args.seed,
                                       args.vocab_size, args.min_token_id)
            pcts = [float(x) for x in args.percentiles.split(",") if x]
            out = await run_benchmark(backend, reqs, args.concurrency,
                                      args.request_rate, args.seed, args.slo_ttft,
                                      args.slo_tpot, args.slo_e2el, pcts)
            print(metrics.format_table(f"{args.backend} serving benchmark",
                                       out["summary"], pcts))
            for e in out["errors"]:
                print("error:", e)
        out["args"] = {k: (v if v != float("inf") else "inf") for k, v in vars(args).items()}
        return out
    finally:
        await backend.close()


def main(argv=None):
    args = parse_args(argv)
    out = asyncio.run(amain(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    failed = out.get("summary", {}).get("failed", 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
