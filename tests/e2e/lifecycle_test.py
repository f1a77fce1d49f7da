"""The daemon's lifecycle through the real braidd: health NOT_SERVING while
the model loads (braid RPCs UNAVAILABLE), SERVING after; SIGTERM drains
(NOT_SERVING, new requests UNAVAILABLE, streams in flight finish, exit 0);
streams still running when the grace period ends get UNAVAILABLE; server
reflection is off unless --reflection.
"""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()

REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
# ServerReflectionRequest{list_services: ""}: field 7, length 0.
LIST_SERVICES = b"\x3a\x00"


def list_services(addr):
    """Raw reflection call; returns the response bytes or raises RpcError."""
    with grpc.insecure_channel(addr) as channel:
        call = channel.stream_stream(REFLECTION)(iter([LIST_SERVICES]),
                                                 timeout=10)
        return next(iter(call))


class Stream(threading.Thread):
    """One Generate stream read to its end in a thread."""

    def __init__(self, stub, max_tokens):
        super().__init__(daemon=True)
        self.stub, self.max_tokens = stub, max_tokens
        self.first = threading.Event()
        self.tokens, self.final, self.error = 0, None, None

    def run(self):
        try:
            for r in self.stub.Generate(pb.GenerateRequest(
                    prompt=pb.Prompt(text=b"Tell me a long story."),
                    sampling=pb.SamplingParams(max_tokens=self.max_tokens,
                                               ignore_eos=True)),
                    timeout=120):
                self.tokens += len(r.token_ids)
                self.first.set()
                if r.HasField("final"):
                    self.final = r.final
        except grpc.RpcError as e:
            self.error = e
        self.first.set()


class LifecycleTest(unittest.TestCase):
    def test_not_serving_while_loading_then_serving(self):
        d = harness.Daemon("--debug_load_delay_ms=4000", "--reflection",
                           wait_serving=False)
        try:
            for service in ["", "braid.v1.Braid"]:
                self.assertEqual(d.health(service=service), "NOT_SERVING")
            with grpc.insecure_channel(d.addr) as channel:
                stub = pb_grpc.BraidStub(channel)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.Tokenize(pb.TokenizeRequest(
                        prompt=pb.Prompt(text=b"hi")), timeout=5)
                self.assertEqual(cm.exception.code(),
                                 grpc.StatusCode.UNAVAILABLE)
                self.assertIn("loading", cm.exception.details())
                self.assertIn('braid_server_state{state="loading"} 1',
                              d.metrics_text())
                d.wait_serving()
                self.assertEqual(d.health(service="braid.v1.Braid"),
                                 "SERVING")
                stub.Tokenize(pb.TokenizeRequest(
                    prompt=pb.Prompt(text=b"hi")), timeout=5)
                self.assertIn('braid_server_state{state="serving"} 1',
                              d.metrics_text())
            # --reflection lists the services.
            self.assertIn(b"braid.v1.Braid", list_services(d.addr))
        finally:
            self.assertEqual(d.stop(), 0, d.read_log())

    def test_drain_lets_streams_in_flight_finish(self):
        d = harness.Daemon("--drain_grace_seconds=30", "--threads=2")
        channel = grpc.insecure_channel(d.addr)
        stub = pb_grpc.BraidStub(channel)
        try:
            # Reflection is off by default.
            with self.assertRaises(grpc.RpcError) as cm:
                list_services(d.addr)
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.UNIMPLEMENTED)
            streams = [Stream(stub, 160) for _ in range(3)]
            for s in streams:
                s.start()
            for s in streams:
                self.assertTrue(s.first.wait(60))
            d.proc.send_signal(signal.SIGTERM)
            harness.wait_for(lambda: d.health() == "NOT_SERVING", 5,
                             "health NOT_SERVING after SIGTERM")
            self.assertTrue(any(s.is_alive() for s in streams),
                            "streams ended before the drain could be seen")
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Tokenize(pb.TokenizeRequest(
                    prompt=pb.Prompt(text=b"hi")), timeout=5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("draining", cm.exception.details())
            for s in streams:
                s.join(60)
                self.assertIsNone(s.error)
                self.assertEqual(s.final.finish_reason,
                                 pb.FINISH_REASON_LENGTH)
                self.assertEqual(s.tokens, 160)
            self.assertEqual(d.proc.wait(30), 0, d.read_log())
        finally:
            channel.close()
            d.stop()

    def test_streams_past_the_grace_period_get_unavailable(self):
        d = harness.Daemon("--drain_grace_seconds=1", "--threads=2")
        channel = grpc.insecure_channel(d.addr)
        try:
            s = Stream(pb_grpc.BraidStub(channel), 3000)
            s.start()
            self.assertTrue(s.first.wait(60))
            start = time.time()
            d.proc.send_signal(signal.SIGTERM)
            s.join(30)
            self.assertFalse(s.is_alive())
            self.assertIsNotNone(s.error)
            self.assertEqual(s.error.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertIn("--drain_grace_seconds=1", s.error.details())
            self.assertLess(time.time() - start, 10)
            self.assertEqual(d.proc.wait(30), 0, d.read_log())
            self.assertIn("ended 1 streams after the grace period",
                          d.read_log())
        finally:
            channel.close()
            d.stop()


if __name__ == "__main__":
    harness.main()
