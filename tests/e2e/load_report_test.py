"""What balancers read from a real braidd: the ORCA load report in every
gRPC call's trailers (endpoint-load-metrics-bin), the HAProxy agent check
(down while loading, a weight while serving, drain while draining), the
stuck-step watchdog (an injected stall turns health NOT_SERVING and the
agent check down until steps flow again, and is counted), and
--drain_notice_seconds (NOT_SERVING at once, new requests still served).
"""
import base64
import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()
orca = harness.load_orca()

TRAILER = "endpoint-load-metrics-bin"


def generate(stub, max_tokens=4, timeout=60):
    """A Generate read to its end: its token count."""
    return sum(len(r.token_ids) for r in stub.Generate(pb.GenerateRequest(
        prompt=pb.Prompt(text=b"Name three colours."),
        sampling=pb.SamplingParams(max_tokens=max_tokens, ignore_eos=True)),
        timeout=timeout))


def raw_call(addr, method, request):
    """One gRPC call by curl over h2c, since grpcio's client keeps ORCA's
    trailer to itself: the response headers and trailers as a dict."""
    body = request.SerializeToString()
    with tempfile.NamedTemporaryFile(suffix=".grpc") as f:
        f.write(b"\0" + len(body).to_bytes(4, "big") + body)
        f.flush()
        out = subprocess.run(
            ["curl", "-sv", "--http2-prior-knowledge", "-o", "/dev/null",
             "-H", "content-type: application/grpc", "-H", "te: trailers",
             "--data-binary", "@" + f.name,
             f"http://{addr}/braid.v1.Braid/{method}"],
            capture_output=True, text=True, timeout=60)
    headers = {}
    for line in out.stderr.splitlines():
        if line.startswith("< ") and ": " in line:
            k, v = line[2:].split(": ", 1)
            headers[k.lower()] = v.strip()
    return headers


def report(headers):
    """The ORCA report in `headers` (base64 on the wire, padding dropped)."""
    value = headers[TRAILER]
    r = orca.OrcaLoadReport()
    r.ParseFromString(base64.b64decode(value + "=" * (-len(value) % 4)))
    return r


class LoadReportTest(unittest.TestCase):
    def test_every_call_carries_a_load_report(self):
        d = harness.Daemon("--threads=1", agent=True)
        try:
            with grpc.insecure_channel(d.addr) as channel:
                stub = pb_grpc.BraidStub(channel)
                # Load inside the tracker's window: the report shows the
                # busy share and the finished requests.
                for _ in range(6):
                    self.assertEqual(generate(stub, max_tokens=8), 8)
            h = raw_call(d.addr, "Generate", pb.GenerateRequest(
                prompt=pb.Prompt(text=b"Hi."),
                sampling=pb.SamplingParams(max_tokens=2, ignore_eos=True)))
            self.assertEqual(h["grpc-status"], "0")
            r = report(h)
            self.assertGreater(r.application_utilization, 0)
            self.assertLessEqual(r.application_utilization, 1)
            self.assertGreater(r.rps_fractional, 0)
            self.assertGreater(r.cpu_utilization, 0)  # the busy share
            self.assertEqual(r.application_utilization,
                             max(r.utilization["occupancy"],
                                 r.mem_utilization))
            for name in ("queue_io", "queue_reasoning", "queue_prompt",
                         "waiting", "running", "kv_usage"):
                self.assertIn(name, r.named_metrics)
            # A unary call, an error and a Session call carry it too.
            h = raw_call(d.addr, "Tokenize", pb.TokenizeRequest(
                prompt=pb.Prompt(text=b"hello")))
            self.assertEqual(h["grpc-status"], "0")
            report(h)
            h = raw_call(d.addr, "Generate", pb.GenerateRequest(
                prompt=pb.Prompt(tokens=pb.TokenIds(ids=[10 ** 9]))))
            self.assertEqual(h["grpc-status"], "3")  # INVALID_ARGUMENT
            report(h)
            h = raw_call(d.addr, "Session", pb.SessionRequest(
                open=pb.SessionOpen(session_id="s")))
            report(h)
            reply = harness.agent_check(d.agent_port)
            self.assertRegex(reply, r"^ready up \d+%\n$")
        finally:
            d.stop_checked()

    def test_agent_check_follows_loading_and_draining(self):
        d = harness.Daemon("--debug_load_delay_ms=3000", wait_serving=False,
                           agent=True)
        try:
            self.assertEqual(harness.agent_check(d.agent_port), "down\n")
            d.wait_serving()
            self.assertRegex(harness.agent_check(d.agent_port),
                             r"^ready up \d+%\n$")
        finally:
            d.stop_checked()

    def test_drain_notice_keeps_serving_while_reporting_not_serving(self):
        d = harness.Daemon("--drain_notice_seconds=600", agent=True)
        try:
            d.proc.send_signal(signal.SIGTERM)
            harness.wait_for(lambda: d.health() == "NOT_SERVING", 30,
                             "health turns NOT_SERVING on SIGTERM")
            self.assertEqual(harness.agent_check(d.agent_port), "drain\n")
            with grpc.insecure_channel(d.addr) as channel:
                self.assertEqual(generate(pb_grpc.BraidStub(channel)), 4)
            # A second signal ends the notice: the drain runs, exit 0.
            d.proc.send_signal(signal.SIGTERM)
            self.assertEqual(d.proc.wait(timeout=60), 0)
            self.assertIn("--drain_notice_seconds", d.read_log())
        finally:
            d.stop()

    def test_watchdog_reports_a_stuck_step_until_steps_flow(self):
        # Step 2 stalls for 8 s; the watchdog's bound is 1 s.
        d = harness.Daemon("--step_watchdog_seconds=1", "--debug_stall_step=2",
                           "--debug_stall_ms=8000", agent=True)
        try:
            result = {}

            def run():
                with grpc.insecure_channel(d.addr) as channel:
                    result["tokens"] = generate(pb_grpc.BraidStub(channel),
                                                timeout=120)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            harness.wait_for(lambda: d.health() == "NOT_SERVING", 30,
                             "health turns NOT_SERVING during the stall")
            self.assertEqual(harness.agent_check(d.agent_port), "down\n")
            self.assertEqual(d.metric('braid_server_state{state="stalled"}'),
                             1)
            self.assertEqual(d.metric("braid_engine_stalls_total"), 1)
            harness.wait_for(lambda: d.health() == "SERVING", 60,
                             "health is SERVING again after the stall")
            t.join(timeout=60)
            self.assertEqual(result.get("tokens"), 4)
            self.assertEqual(d.metric('braid_server_state{state="serving"}'),
                             1)
            self.assertRegex(harness.agent_check(d.agent_port),
                             r"^ready up \d+%\n$")
            log = d.read_log()
            self.assertIn("over --step_watchdog_seconds=1", log)
            self.assertIn("engine steps flow again", log)
        finally:
            d.stop_checked()


if __name__ == "__main__":
    harness.main()
