"""Shared pieces of braid's end-to-end tests.

Starts the real `braidd` binary on a free loopback port, generates Python
stubs for the braid.v1 API with grpc_tools, and runs unittest cases with a
JUnit XML report (Bazel's XML_OUTPUT_FILE) so `make test` counts each case.
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET


def require_env(name, what):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"FAIL: {name} is not set: {what}")
    return value


def runfile(path):
    """Absolute path of a Bazel data dependency given its workspace path."""
    base = os.environ.get("TEST_SRCDIR")
    if base:
        p = os.path.join(base, os.environ.get("TEST_WORKSPACE", "braid"), path)
        if os.path.exists(p):
            return p
    # Outside Bazel (benchmarks run from the repository root).
    built = os.path.abspath(os.path.join("bazel-bin", path))
    return built if os.path.exists(built) else os.path.abspath(path)


def load_stubs():
    """Compiles braid.proto with grpc_tools into a temp dir and imports it."""
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="braid_pb_")
    proto_root = os.path.dirname(os.path.dirname(os.path.dirname(
        runfile("proto/braid/v1/braid.proto"))))
    rc = protoc.main(["protoc", f"-I{proto_root}", f"--python_out={out}",
                      f"--grpc_python_out={out}",
                      os.path.join(proto_root, "braid/v1/braid.proto")])
    if rc != 0:
        sys.exit("FAIL: protoc could not compile braid.proto")
    sys.path.insert(0, out)
    from braid.v1 import braid_pb2, braid_pb2_grpc
    return braid_pb2, braid_pb2_grpc


def load_orca():
    """Compiles braid's copy of ORCA's load report proto and imports it."""
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="orca_pb_")
    path = runfile("proto/xds/data/orca/v3/orca_load_report.proto")
    root = path[:-len("xds/data/orca/v3/orca_load_report.proto")]
    rc = protoc.main(["protoc", f"-I{root}", f"--python_out={out}", path])
    if rc != 0:
        sys.exit("FAIL: protoc could not compile orca_load_report.proto")
    sys.path.insert(0, out)
    from xds.data.orca.v3 import orca_load_report_pb2
    return orca_load_report_pb2


def agent_check(port):
    """An HAProxy agent check's read: connect, read to the end."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = b""
        while True:
            chunk = s.recv(256)
            if not chunk:
                return out.decode()
            out += chunk


def free_port():
    """A loopback port no process listens on right now."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout, what, interval=0.02):
    """Polls `condition` until it returns a true value (returned) or
    `timeout` seconds pass (AssertionError naming `what`)."""
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s: {what}")
        time.sleep(interval)


# Words the storm tests draw their prompts from.
WORDS = ("apple river stone cloud north quiet seven market winter lamp "
         "garden silver yellow engine story harbor").split()


def random_sampling(rng):
    """SamplingParams fields drawn from `rng`: 1-16 tokens, ignore_eos or
    not; greedy or seeded temperature with top-k / top-p / min-p; repetition
    and frequency / presence penalties; a stop string; a stop token;
    log-probabilities with and without top alternatives (each part at
    random)."""
    sp = dict(max_tokens=rng.randint(1, 16), ignore_eos=rng.random() < 0.5)
    if rng.random() < 0.6:
        sp.update(temperature=rng.choice([0.5, 0.8, 1.2]),
                  seed=rng.randrange(1 << 30))
        if rng.random() < 0.5:
            sp.update(top_k=rng.choice([5, 40]))
        if rng.random() < 0.3:
            sp.update(top_p=rng.choice([0.5, 0.9]))
        if rng.random() < 0.3:
            sp.update(min_p=0.05)
    if rng.random() < 0.4:
        sp.update(repetition_penalty=1.3)
    if rng.random() < 0.4:
        sp.update(frequency_penalty=0.5, presence_penalty=0.3)
    if rng.random() < 0.3:
        sp.update(stop=[rng.choice([b".", b" the", b"\n"])])
    if rng.random() < 0.2:
        sp.update(stop_token_ids=[rng.choice([28, 30, 282])])  # "," "." " of"
    if rng.random() < 0.5:
        sp.update(logprobs=True, top_logprobs=rng.choice([0, 3]))
    return sp


def logprob_tuples(logprobs):
    """TokenLogprob messages as comparable tuples (top alternatives too)."""
    return [(lp.token_id, lp.logprob, [(t.token_id, t.logprob) for t in lp.top])
            for lp in logprobs]


def wait_engine_idle(stats_path, timeout=10):
    """Waits for --stats_file (at `stats_path`) to show no session, no
    request and every KV block free; returns the stats, or raises
    AssertionError with the last ones after `timeout` seconds."""
    import json
    deadline = time.time() + timeout
    stats = None
    while time.time() < deadline:
        try:
            with open(stats_path) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            stats = None
        if (stats and stats["requests"] == 0 and stats["sessions"] == 0
                and stats["kv_blocks_free"] == stats["kv_blocks_total"]):
            return stats
        time.sleep(0.05)
    raise AssertionError(f"engine not idle: {stats}")


class Daemon:
    """A braidd process on 127.0.0.1:<free port>, stopped with SIGTERM.

    Metrics are served on a free loopback port (`metrics_port`) and the
    drain grace period is 5 s unless `flags` say otherwise. With
    `wait_serving` (the default) the constructor returns once the health
    service reports SERVING over a plaintext channel. `model` is the GGUF to
    serve, $BRAID_MODEL by default. With `http` the OpenAI-compatible HTTP
    API listens on a free loopback port too (`http_port`, `base_url`), with
    `agent` the HAProxy agent check (`agent_port`). `env`: variables added
    to braidd's environment."""

    def __init__(self, *flags, wait_serving=True, model=None, http=False,
                 agent=False, env=None):
        model = model or require_env(
            "BRAID_MODEL",
            "path of SmolLM2-135M-Instruct.Q4_1.gguf (`make test` sets it)")
        self.dir = tempfile.mkdtemp(prefix="braidd_")
        port_file = os.path.join(self.dir, "port")
        metrics_port_file = os.path.join(self.dir, "metrics_port")
        self.log_path = os.path.join(self.dir, "braidd.log")
        self.log = open(self.log_path, "w")
        extra = []
        if not any(f.startswith("--metrics_listen") for f in flags):
            extra.append("--metrics_listen=127.0.0.1:0")
        if not any(f.startswith("--drain_grace_seconds") for f in flags):
            extra.append("--drain_grace_seconds=5")
        http_port_file = os.path.join(self.dir, "http_port")
        if http:
            extra += ["--http_listen=127.0.0.1:0",
                      f"--http_port_file={http_port_file}"]
        agent_port_file = os.path.join(self.dir, "agent_port")
        if agent:
            extra += ["--agent_check_listen=127.0.0.1:0",
                      f"--agent_check_port_file={agent_port_file}"]
        self.proc = subprocess.Popen(
            [runfile("server/braidd"), f"--model={model}",
             "--listen=127.0.0.1:0", f"--port_file={port_file}",
             f"--metrics_port_file={metrics_port_file}", *extra, *flags],
            env={**os.environ, **(env or {})},
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while not os.path.exists(port_file):
            if self.proc.poll() is not None:
                raise RuntimeError("braidd exited early:\n" + self.read_log())
            if time.time() > deadline:
                raise RuntimeError("braidd did not start:\n" + self.read_log())
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read())
        self.addr = f"127.0.0.1:{self.port}"
        self.http_port = None
        if http:
            wait_for(lambda: os.path.exists(http_port_file), 60,
                     "braidd writes its HTTP port")
            with open(http_port_file) as f:
                self.http_port = int(f.read())
        self.base_url = f"http://127.0.0.1:{self.http_port}/v1"
        self.agent_port = None
        if agent:
            wait_for(lambda: os.path.exists(agent_port_file), 60,
                     "braidd writes its agent-check port")
            with open(agent_port_file) as f:
                self.agent_port = int(f.read())
        self.metrics_port = None
        if os.path.exists(metrics_port_file):
            with open(metrics_port_file) as f:
                self.metrics_port = int(f.read())
        if wait_serving:
            self.wait_serving()

    def health(self, channel=None, service=""):
        """The health status name ("SERVING", ...), or the RPC error code
        name when the check fails."""
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        own = channel is None
        channel = channel or grpc.insecure_channel(self.addr)
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5)
            return health_pb2.HealthCheckResponse.ServingStatus.Name(
                resp.status)
        except grpc.RpcError as e:
            return e.code().name
        finally:
            if own:
                channel.close()

    def wait_serving(self, channel=None, timeout=120):
        def serving():
            if self.proc.poll() is not None:
                raise RuntimeError("braidd exited early:\n" + self.read_log())
            return self.health(channel) == "SERVING"
        wait_for(serving, timeout, "braidd reports SERVING", interval=0.05)

    def metric(self, name):
        """The value of the series `name` (with its labels, as the page
        writes them) on /metrics."""
        for line in self.metrics_text().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        raise AssertionError(f"no {name} in /metrics")

    def metrics_text(self):
        """The /metrics page."""
        import urllib.request
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/metrics",
                timeout=10) as r:
            return r.read().decode()

    def rpc_count(self, method, code, frontend="grpc"):
        """braid_rpcs_total{code, frontend, method} from /metrics."""
        return self.metric(f'braid_rpcs_total{{code="{code}",'
                           f'frontend="{frontend}",method="{method}"}}')

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def stop_checked(self):
        """stop(), and an AssertionError with the log unless it exited 0."""
        rc = self.stop()
        if rc != 0:
            raise AssertionError(f"braidd exited {rc}:\n{self.read_log()}")


class DaemonTestCase(unittest.TestCase):
    """A test class served by one braidd: setUpClass calls start_daemon,
    which sets cls.daemon, cls.channel and cls.stub (braid.v1); after the
    class the channel closes and the daemon stops, its exit checked."""

    @classmethod
    def start_daemon(cls, *flags, **kwargs):
        import grpc  # noqa: PLC0415 (the venv's; harness itself needs none)
        cls.daemon = Daemon(*flags, **kwargs)
        cls.channel = grpc.insecure_channel(cls.daemon.addr)
        cls.stub = load_stubs()[1].BraidStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.daemon.stop_checked()


class JUnitResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []
        self._start = 0.0

    def startTest(self, test):
        self._start = time.time()
        super().startTest(test)

    def _record(self, test, kind=None, detail=""):
        self.cases.append((test.id(), time.time() - self._start, kind, detail))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        # No silent skips: a skipped case counts as a failure.
        super().addSkip(test, reason)
        self._record(test, "failure", "skipped: " + reason)


def main():
    runner = unittest.TextTestRunner(resultclass=JUnitResult, verbosity=2)
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules["__main__"])
    result = runner.run(suite)
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        root = ET.Element("testsuites")
        ts = ET.SubElement(root, "testsuite", name="e2e",
                           tests=str(len(result.cases)))
        for name, secs, kind, detail in result.cases:
            tc = ET.SubElement(ts, "testcase", name=name, time=f"{secs:.3f}")
            if kind:
                ET.SubElement(tc, kind, message=detail[:200]).text = detail
        ET.ElementTree(root).write(xml_path)
    ok = result.wasSuccessful() and not result.skipped
    sys.exit(0 if ok else 1)
