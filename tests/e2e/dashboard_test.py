"""The Grafana dashboard (deploy/grafana/braid-dashboard.json) against a real
Prometheus (Debian's `prometheus`) on loopback, scraping a real braidd under
load every second: every panel's every query returns data through
Prometheus' HTTP API, and every panel has a finite value. Also the series
an endpoint picker reads (braid's names with vLLM's meanings).

The load mixes good requests, cancellations, invalid requests and bursts
over --max_waiting_requests (rejections), on a KV pool small enough to
preempt, so that each panel has something to show.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()

LOAD_SECONDS = 15
PICKER = ["braid_num_requests_waiting", "braid_num_requests_running",
          "braid_kv_usage_ratio", "braid_kv_cache_info"]


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


class Prometheus:
    """A prometheus server scraping `target` every second."""

    def __init__(self, target):
        binary = shutil.which("prometheus") or "/usr/bin/prometheus"
        if not os.path.exists(binary):
            sys.exit("FAIL: the Prometheus server is not installed "
                     "(scripts/setup.sh installs the Debian package "
                     "`prometheus`)")
        self.dir = tempfile.mkdtemp(prefix="braid_prom_")
        with open(harness.runfile("deploy/prometheus/prometheus.yml")) as f:
            config = f.read()
        config = (config.replace("scrape_interval: 15s", "scrape_interval: 1s")
                  .replace("127.0.0.1:9464", target))
        assert target in config
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(config)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        for _ in range(3):  # the free port may be taken meanwhile
            self.port = harness.free_port()
            self.proc = subprocess.Popen(
                [binary, f"--config.file={cfg}",
                 f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--log.level=warn"],
                stdout=self.log, stderr=subprocess.STDOUT)
            try:
                harness.wait_for(self.ready, 30, "prometheus ready",
                                 interval=0.1)
                return
            except AssertionError:
                self.stop()
        raise RuntimeError("prometheus did not start:\n" + self.read_log())

    def ready(self):
        if self.proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?" +
               urllib.parse.urlencode({"query": expr, "time": time.time()}))
        body = get_json(url)
        if body.get("status") != "success":
            raise AssertionError(f"{expr}: {body}")
        return body["data"]["result"]

    def read_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def panel_queries():
    """(panel title, expression) for every target of every panel, with the
    dashboard's variables filled in the way Grafana would."""
    with open(harness.runfile("deploy/grafana/braid-dashboard.json")) as f:
        dash = json.load(f)
    out = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$__rate_interval", "1m")
                    .replace("$instance", ".*"))
            out.append((panel["title"], expr))
    return dash, out


class Load:
    """Background traffic against the daemon for LOAD_SECONDS."""

    def __init__(self, addr):
        self.addr = addr
        self.stop = threading.Event()
        self.counts = {"ok": 0, "cancelled": 0, "invalid": 0,
                       "rejected": 0, "other": 0}
        self.lock = threading.Lock()

    def count(self, key):
        with self.lock:
            self.counts[key] += 1

    def worker(self, i):
        with grpc.insecure_channel(self.addr) as ch:
            stub = pb_grpc.BraidStub(ch)
            n = 0
            while not self.stop.is_set():
                n += 1
                try:
                    # An invalid request first and every 7th (however
                    # few requests a slow machine lets each worker make).
                    if n % 7 == 1:
                        list(stub.Generate(pb.GenerateRequest(
                            prompt=pb.Prompt(text=b"x"),
                            sampling=pb.SamplingParams(max_tokens=0)),
                            timeout=10))
                    call = stub.Generate(pb.GenerateRequest(
                        prompt=pb.Prompt(
                            text=f"Worker {i} request {n}: tell a story "
                                 "about a lighthouse keeper.".encode()),
                        sampling=pb.SamplingParams(max_tokens=48 + 16 * (n % 4),
                                                   ignore_eos=True)),
                        timeout=60)
                    for k, _ in enumerate(call):
                        if n % 5 == 0 and k == 1:  # cancel mid-stream
                            call.cancel()
                    self.count("ok")
                except grpc.RpcError as e:
                    self.count({grpc.StatusCode.CANCELLED: "cancelled",
                                grpc.StatusCode.INVALID_ARGUMENT: "invalid",
                                grpc.StatusCode.RESOURCE_EXHAUSTED: "rejected"}
                               .get(e.code(), "other"))
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        time.sleep(0.05)  # back off, as a client should

    def burst(self):
        """Many requests at once, over --max_waiting_requests."""
        with grpc.insecure_channel(self.addr) as ch:
            stub = pb_grpc.BraidStub(ch)
            calls = [stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=b"Burst"),
                sampling=pb.SamplingParams(max_tokens=2)), timeout=60)
                for _ in range(16)]
            for call in calls:
                try:
                    list(call)
                    self.count("ok")
                except grpc.RpcError as e:
                    self.count("rejected" if e.code() ==
                               grpc.StatusCode.RESOURCE_EXHAUSTED else "other")

    def cancel_one(self):
        """One request cancelled mid-stream on the idle daemon: the load's
        own cancellations can all meet RESOURCE_EXHAUSTED first on a slow or
        loaded machine, and the panels need at least one."""
        with grpc.insecure_channel(self.addr) as ch:
            stub = pb_grpc.BraidStub(ch)
            call = stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=b"Cancel me after the first chunk."),
                sampling=pb.SamplingParams(max_tokens=64, ignore_eos=True)),
                timeout=60)
            try:
                for _ in call:
                    call.cancel()
                self.count("ok")
            except grpc.RpcError as e:
                self.count("cancelled" if e.code() == grpc.StatusCode.CANCELLED
                           else "other")

    def run(self):
        threads = [threading.Thread(target=self.worker, args=(i,))
                   for i in range(8)]
        for t in threads:
            t.start()
        end = time.time() + LOAD_SECONDS
        while time.time() < end:
            self.burst()
            time.sleep(1)
        self.stop.set()
        for t in threads:
            t.join(120)
        self.cancel_one()
        return self.counts


class DashboardTest(unittest.TestCase):
    def test_every_panel_returns_data(self):
        dash, queries = panel_queries()
        self.assertGreaterEqual(len(dash["panels"]), 10)
        daemon = harness.Daemon(
            "--context_length=128",
            "--kv_budget_tokens=256", "--max_num_seqs=8",
            "--max_waiting_requests=4", "--threads=2")
        prom = None
        try:
            prom = Prometheus(f"127.0.0.1:{daemon.metrics_port}")
            counts = Load(daemon.addr).run()
            print("load:", counts, file=sys.stderr)
            for key in ["ok", "cancelled", "invalid", "rejected"]:
                self.assertGreater(counts[key], 0, counts)

            # Wait for a scrape that saw the end of the load (cancelled
            # requests may still add a few tokens after it).
            def output_tokens():
                for line in daemon.metrics_text().splitlines():
                    if line.startswith("braid_output_tokens_total "):
                        return float(line.split()[1])
            final = output_tokens()
            harness.wait_for(
                lambda: [r for r in prom.query("braid_output_tokens_total")
                         if float(r["value"][1]) >= final], 30,
                "prometheus scraped the final counters", interval=0.2)

            for title, expr in queries:
                with self.subTest(panel=title, expr=expr):
                    self.assertTrue(prom.query(expr), "no data")
            by_panel = {}
            for title, expr in queries:
                values = [float(r["value"][1]) for r in prom.query(expr)]
                by_panel.setdefault(title, []).extend(values)
            for title, values in by_panel.items():
                with self.subTest(panel=title):
                    self.assertTrue(any(math.isfinite(v) for v in values),
                                    f"only NaN: {values}")
            for name in PICKER:
                with self.subTest(metric=name):
                    self.assertTrue(prom.query(name), "no data")
            # The load preempted and was rejected: those panels are not 0.
            self.assertGreater(
                float(prom.query("braid_preemptions_total")[0]["value"][1]), 0)
            self.assertGreater(float(prom.query(
                "sum(braid_admission_rejections_total)")[0]["value"][1]), 0)
        finally:
            if prom is not None:
                prom.stop()
            rc = daemon.stop()
        self.assertEqual(rc, 0, daemon.read_log())


if __name__ == "__main__":
    harness.main()
