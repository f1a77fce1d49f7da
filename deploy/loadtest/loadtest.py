#!/usr/bin/env python3
"""Load tests for a braid endpoint (one braidd, or a Service / Gateway in
front of many), over tools/loadgen's clients (gRPC Generate or the OpenAI
HTTP API).

sweep: Poisson arrivals at each of --rates (requests/s) for --duration-s
  seconds each; prints a table (throughput, TTFT / ITL / TPOT percentiles,
  goodput for --slo-ttft / --slo-tpot) and writes JSON plus two PNG plots to
  --out: latency against throughput, and goodput against the offered rate.

soak: Poisson arrivals at --rate for --hours, in windows of --window-s;
  after each window one line: requests, errors, TTFT p99, and the server's
  resident memory from --metrics-url (process_resident_memory_bytes), with
  its growth since the first window. A window at --rate runs first as a
  warm-up (threads, allocator arenas and KV pages a fresh server creates
  under that load are not growth). Ends non-zero on any error or when
  memory grew more than --max-growth (5% by default).

  deploy/loadtest/loadtest.py sweep --addr HOST:50051 --rates 1,2,4,8 --out /tmp/sweep
  deploy/loadtest/loadtest.py sweep --backend openai --base-url http://GATEWAY/ ...
  deploy/loadtest/loadtest.py soak --addr HOST:50051 --rate 2 --hours 4 \\
      --metrics-url http://HOST:9464/metrics
"""
import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "loadgen"))
import loadgen  # noqa: E402
import metrics  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["sweep", "soak"])
    p.add_argument("--backend", choices=["braid", "openai"], default="braid")
    p.add_argument("--addr", default="127.0.0.1:50051")
    p.add_argument("--proto", default=None)
    p.add_argument("--base-url", default="http://127.0.0.1:8080")
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--vocab-size", type=int, default=49152)
    p.add_argument("--min-token-id", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slo-ttft", type=float, default=2000, help="ms")
    p.add_argument("--slo-tpot", type=float, default=100, help="ms")
    # sweep
    p.add_argument("--rates", default="0.5,1,2,4")
    p.add_argument("--duration-s", type=float, default=60)
    p.add_argument("--out", default="loadtest-out")
    # soak
    p.add_argument("--rate", type=float, default=1.0)
    p.add_argument("--hours", type=float, default=1.0)
    p.add_argument("--window-s", type=float, default=300)
    p.add_argument("--metrics-url", default=None,
                   help="the server's /metrics, for its resident memory")
    p.add_argument("--max-growth", type=float, default=0.05)
    return p.parse_args(argv)


async def run_at(backend, args, rate, n, seed):
    reqs = loadgen.random_requests(n, args.prompt_len, args.output_len, seed,
                                   args.vocab_size, args.min_token_id)
    return await loadgen.run_benchmark(
        backend, reqs, request_rate=rate, seed=seed,
        slo_ttft_ms=args.slo_ttft, slo_tpot_ms=args.slo_tpot)


COLUMNS = [("rate", "offered req/s", "{:.2f}"),
           ("request_throughput", "req/s", "{:.2f}"),
           ("output_throughput", "out tok/s", "{:.1f}"),
           ("p50_ttft_ms", "TTFT p50", "{:.0f}"),
           ("p99_ttft_ms", "TTFT p99", "{:.0f}"),
           ("p50_itl_ms", "ITL p50", "{:.1f}"),
           ("p99_itl_ms", "ITL p99", "{:.1f}"),
           ("p99_tpot_ms", "TPOT p99", "{:.1f}"),
           ("request_goodput", "goodput req/s", "{:.2f}"),
           ("failed", "failed", "{:d}")]


def table(rows):
    head = "| " + " | ".join(c[1] for c in COLUMNS) + " |"
    sep = "|" + "|".join(" ---: " for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(fmt.format(r[key]) for key, _, fmt in COLUMNS)
            + " |" for r in rows]
    return "\n".join([head, sep] + body)


def plot(rows, out, slo):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tput = [r["output_throughput"] for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(tput, [r["p50_ttft_ms"] for r in rows], "o-", label="TTFT p50")
    ax[0].plot(tput, [r["p99_ttft_ms"] for r in rows], "o--", label="TTFT p99")
    ax[0].set_xlabel("output tokens/s")
    ax[0].set_ylabel("ms")
    ax[0].set_title("time to first token")
    ax[0].legend()
    ax[1].plot(tput, [r["p50_itl_ms"] for r in rows], "o-", label="ITL p50")
    ax[1].plot(tput, [r["p99_itl_ms"] for r in rows], "o--", label="ITL p99")
    ax[1].set_xlabel("output tokens/s")
    ax[1].set_title("inter-token latency")
    ax[1].legend()
    fig.tight_layout()
    latency = os.path.join(out, "latency.png")
    fig.savefig(latency, dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    rates = [r["rate"] for r in rows]
    ax.plot(rates, rates, ":", color="grey", label="offered")
    ax.plot(rates, [r["request_throughput"] for r in rows], "o-",
            label="completed")
    ax.plot(rates, [r["request_goodput"] for r in rows], "o-",
            label=f"goodput (TTFT <= {slo[0]:g} ms, TPOT <= {slo[1]:g} ms)")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("requests/s")
    ax.set_title("goodput")
    ax.legend()
    fig.tight_layout()
    goodput = os.path.join(out, "goodput.png")
    fig.savefig(goodput, dpi=100)
    plt.close(fig)
    return [latency, goodput]


async def sweep(args):
    os.makedirs(args.out, exist_ok=True)
    backend = loadgen.make_backend(args)
    rows = []
    try:
        await run_at(backend, args, float("inf"), 1, args.seed + 999)  # warm-up
        for i, rate in enumerate(float(x) for x in args.rates.split(",")):
            n = max(1, round(rate * args.duration_s))
            r = await run_at(backend, args, rate, n, args.seed + i)
            s = dict(r["summary"], rate=rate, errors=r["errors"])
            rows.append(s)
            print(f"rate {rate:g}/s: {s['completed']} done, {s['failed']} "
                  f"failed", flush=True)
    finally:
        await backend.close()
    print(table(rows))
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"rows": rows, "args": vars(args)}, f, indent=1)
    for path in plot(rows, args.out, (args.slo_ttft, args.slo_tpot)):
        print("wrote", path)
    return 1 if any(r["failed"] for r in rows) else 0


def resident_bytes(url):
    if not url:
        return None
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("process_resident_memory_bytes "):
                return float(line.split()[1])
    return None


async def soak(args):
    backend = loadgen.make_backend(args)
    first_rss, rss, errors, window = None, None, 0, 0
    try:
        n = max(1, round(args.rate * args.window_s))
        await run_at(backend, args, args.rate, n, args.seed + 999)  # warm-up
        end = time.time() + args.hours * 3600
        while time.time() < end:
            n = max(1, round(args.rate * min(args.window_s, end - time.time())))
            r = await run_at(backend, args, args.rate, n, args.seed + window)
            s = r["summary"]
            errors += s["failed"]
            rss = resident_bytes(args.metrics_url)
            if first_rss is None:
                first_rss = rss
            growth = (rss / first_rss - 1) if rss and first_rss else None
            print(json.dumps({
                "window": window, "completed": s["completed"],
                "failed": s["failed"], "errors": r["errors"],
                "ttft_p99_ms": round(s["p99_ttft_ms"], 1),
                "rss_mib": round(rss / 2**20, 1) if rss else None,
                "rss_growth": round(growth, 4) if growth is not None else None,
            }), flush=True)
            window += 1
    finally:
        await backend.close()
    grew = (rss / first_rss - 1) if rss and first_rss else 0.0
    print(f"soak: {window} windows, {errors} errors, resident memory "
          f"{'grew %.1f%%' % (100 * grew) if first_rss else 'not read'}")
    return 1 if errors or grew > args.max_growth else 0


def main(argv=None):
    args = parse_args(argv)
    return asyncio.run(sweep(args) if args.mode == "sweep" else soak(args))


if __name__ == "__main__":
    sys.exit(main())
