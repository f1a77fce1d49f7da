"""Each transport and request limit through the real braidd: maximum
message size, concurrent streams per connection, keepalive enforcement
(too many pings -> GOAWAY), the server's maximum request duration.
"""
import os
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()


class LimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        cls.daemon = harness.Daemon(
            "--max_receive_message_bytes=4096", "--max_concurrent_streams=1",
            "--max_request_seconds=2", "--keepalive_min_ping_interval_seconds=5",
            "--keepalive_max_ping_strikes=1", "--threads=2",
            f"--stats_file={cls.stats_path}")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop_checked()

    def tokenize(self, channel, text, timeout=5):
        return pb_grpc.BraidStub(channel).Tokenize(
            pb.TokenizeRequest(prompt=pb.Prompt(text=text)), timeout=timeout)

    def test_max_message_size(self):
        with grpc.insecure_channel(self.daemon.addr) as channel:
            self.assertGreater(len(self.tokenize(channel, b"a " * 1000)
                                   .token_ids), 0)
            with self.assertRaises(grpc.RpcError) as cm:
                self.tokenize(channel, b"a " * 3000)
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
            # The connection and the daemon keep serving.
            self.tokenize(channel, b"still fine")

    def test_concurrent_streams_per_connection(self):
        # Separate connections (channels share one by default).
        own = [("grpc.use_local_subchannel_pool", 1)]
        busy = grpc.insecure_channel(self.daemon.addr, options=own)
        other = grpc.insecure_channel(self.daemon.addr, options=own)
        try:
            call = pb_grpc.BraidStub(busy).Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=b"Count to a thousand."),
                sampling=pb.SamplingParams(max_tokens=1000, ignore_eos=True)))
            next(call)  # the stream is open
            # A second call on the same connection waits for a stream slot.
            with self.assertRaises(grpc.RpcError) as cm:
                self.tokenize(busy, b"hi", timeout=0.5)
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.DEADLINE_EXCEEDED)
            # Another connection is not affected.
            self.tokenize(other, b"hi")
            call.cancel()
            harness.wait_for(lambda: self._tokenize_ok(busy), 10,
                             "the slot is free after the cancel")
        finally:
            busy.close()
            other.close()
        harness.wait_engine_idle(self.stats_path)

    def _tokenize_ok(self, channel):
        try:
            self.tokenize(channel, b"hi", timeout=1)
            return True
        except grpc.RpcError:
            return False

    def test_keepalive_ping_flood_is_closed(self):
        def watch(channel):
            states = []
            channel.subscribe(states.append, try_to_connect=True)
            return states

        flood = grpc.insecure_channel(self.daemon.addr, options=[
            ("grpc.keepalive_time_ms", 100),
            ("grpc.keepalive_timeout_ms", 1000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0)])
        polite = grpc.insecure_channel(self.daemon.addr)
        try:
            flood_states, polite_states = watch(flood), watch(polite)
            self.tokenize(flood, b"hi")
            self.tokenize(polite, b"hi")
            harness.wait_for(
                lambda: grpc.ChannelConnectivity.READY in flood_states and
                flood_states[-1] != grpc.ChannelConnectivity.READY, 10,
                f"the pinging connection is closed (states {flood_states})")
            self.assertEqual(polite_states[-1], grpc.ChannelConnectivity.READY)
            self.assertEqual(polite_states.count(grpc.ChannelConnectivity.READY),
                             1)
        finally:
            flood.close()
            polite.close()

    def test_max_request_duration(self):
        with grpc.insecure_channel(self.daemon.addr) as channel:
            start = time.time()
            with self.assertRaises(grpc.RpcError) as cm:
                for _ in pb_grpc.BraidStub(channel).Generate(
                        pb.GenerateRequest(
                            prompt=pb.Prompt(text=b"Go on and on."),
                            sampling=pb.SamplingParams(max_tokens=3000,
                                                       ignore_eos=True))):
                    pass
            elapsed = time.time() - start
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.DEADLINE_EXCEEDED)
            self.assertIn("--max_request_seconds", cm.exception.details())
            self.assertGreaterEqual(elapsed, 1.9)
            self.assertLess(elapsed, 10)
        harness.wait_engine_idle(self.stats_path)


if __name__ == "__main__":
    harness.main()
