"""The Session RPC (full-duplex multi-stream sessions) through the real daemon.

Opens sessions over gRPC with a Python client: input is acknowledged with
the positions where it landed, output streams, input appended while the
model writes lands after the tokens already written, a one-stream greedy
session equals Generate for the same text, and cancel / close / client
cancel / half-close leave no session and no KV block behind (--stats_file).
"""
import json
import os
import queue
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()

SYSTEM = b"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
USER = (b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        b"<|im_start|>assistant\n")


class SessionClient:
    """One Session call fed from a queue; events are read one at a time."""

    def __init__(self, stub, timeout=120):
        self.requests = queue.Queue()

        def gen():
            while True:
                m = self.requests.get()
                if m is None:
                    return
                yield m

        self.call = stub.Session(gen(), timeout=timeout)
        self.events = []

    def send(self, **kw):
        self.requests.put(pb.SessionRequest(**kw))

    def half_close(self):
        self.requests.put(None)

    def next(self):
        ev = next(self.call)
        self.events.append(ev)
        return ev

    def until(self, pred):
        while True:
            ev = self.next()
            if pred(ev):
                return ev

    def rest(self):
        """Reads to the end of the call (StopIteration = OK)."""
        for ev in self.call:
            self.events.append(ev)


def chat_streams(**sampling):
    return [pb.StreamSpec(stream_id="user", role=pb.STREAM_ROLE_USER,
                          kind=pb.STREAM_KIND_INPUT),
            pb.StreamSpec(stream_id="out", role=pb.STREAM_ROLE_OUTPUT,
                          kind=pb.STREAM_KIND_OUTPUT,
                          sampling=pb.SamplingParams(**sampling))]


def output_tokens(events, stream_id="out"):
    """[(position, token id)] of one stream's token events."""
    out = []
    for ev in events:
        if ev.HasField("tokens") and ev.tokens.stream_id == stream_id:
            for i, t in enumerate(ev.tokens.token_ids):
                out.append((ev.tokens.first_position + i, t))
    return out


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        cls.daemon = harness.Daemon("--threads=2", "--context_length=512",
                                    "--kv_budget_tokens=1024",
                                    f"--stats_file={cls.stats_path}")
        cls.channel = grpc.insecure_channel(cls.daemon.addr)
        cls.stub = pb_grpc.BraidStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        rc = cls.daemon.stop()
        if rc != 0:
            raise AssertionError(f"braidd exited {rc}:\n{cls.daemon.read_log()}")

    def assert_engine_idle(self):
        """Waits (10 s at most) for no session, no request and every KV
        block free, as --stats_file reports."""
        deadline = time.time() + 10
        stats = None
        while time.time() < deadline:
            try:
                with open(self.stats_path) as f:
                    stats = json.load(f)
            except (OSError, ValueError):
                stats = None
            if (stats and stats["requests"] == 0 and stats["sessions"] == 0
                    and stats["kv_blocks_free"] == stats["kv_blocks_total"]):
                return stats
            time.sleep(0.05)
        self.fail(f"engine not idle: {stats}")

    def open(self, client, **sampling):
        client.send(open=pb.SessionOpen(prefix=pb.Prompt(text=SYSTEM),
                                        streams=chat_streams(**sampling)))
        ev = client.next()
        self.assertTrue(ev.HasField("opened"), ev)
        self.assertEqual(ev.sequence_number, 0)
        return ev.opened

    def sessions_open(self):
        for line in self.daemon.metrics_text().splitlines():
            if line.startswith("braid_sessions_open"):
                return float(line.split()[-1])
        raise AssertionError("no braid_sessions_open in /metrics")

    def assert_contiguous(self, events):
        self.assertEqual([e.sequence_number for e in events],
                         list(range(len(events))))
        self.assertEqual(len({e.session_id for e in events}), 1)

    def test_append_generates_and_acks(self):
        c = SessionClient(self.stub)
        opened = self.open(c, max_tokens=8, ignore_eos=True)
        self.assertGreater(opened.prefix_length, 0)
        n_user = len(self.stub.Tokenize(pb.TokenizeRequest(
            prompt=pb.Prompt(text=USER))).token_ids)
        c.send(append=pb.SessionAppend(input_id="q1", stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        end = c.until(lambda e: e.HasField("turn_end"))
        acks = [e.ack for e in c.events if e.HasField("ack")]
        self.assertEqual(len(acks), 1)
        self.assertEqual(acks[0].input_id, "q1")
        self.assertEqual(acks[0].stream_id, "user")
        self.assertEqual(acks[0].first_position, opened.prefix_length)
        self.assertEqual(acks[0].end_position, opened.prefix_length + n_user)
        self.assertEqual(acks[0].num_tokens, n_user)
        # The open session shows in the open-sessions gauge.
        self.assertEqual(self.sessions_open(), 1)
        toks = output_tokens(c.events)
        self.assertEqual(len(toks), 8)
        self.assertEqual([p for p, _ in toks],
                         list(range(acks[0].end_position,
                                    acks[0].end_position + 8)))
        self.assertEqual(end.turn_end.stream_id, "out")
        self.assertEqual(end.turn_end.info.finish_reason,
                         pb.FINISH_REASON_LENGTH)
        self.assertEqual(end.turn_end.info.usage.output_tokens, 8)
        c.send(close=pb.SessionClose())
        c.rest()  # ends OK
        self.assert_contiguous(c.events)
        self.assert_engine_idle()
        harness.wait_for(lambda: self.sessions_open() == 0, 10,
                         "the open-sessions gauge drops to 0")

    def test_append_while_streaming_lands_after_written_tokens(self):
        c = SessionClient(self.stub)
        self.open(c, max_tokens=64, ignore_eos=True)
        c.send(append=pb.SessionAppend(input_id="q1", stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("tokens"))
        c.send(append=pb.SessionAppend(
            input_id="q2", stream_id="user",
            input=pb.Prompt(text=b" Answer in one word.")))
        c.until(lambda e: e.HasField("turn_end"))
        idx = next(i for i, e in enumerate(c.events)
                   if e.HasField("ack") and e.ack.input_id == "q2")
        ack = c.events[idx].ack
        self.assertGreater(ack.num_tokens, 0)
        self.assertEqual(ack.end_position - ack.first_position, ack.num_tokens)
        before = output_tokens(c.events[:idx])
        after = output_tokens(c.events[idx:])
        self.assertTrue(before)
        self.assertTrue(after, "the turn ended before the input landed")
        self.assertLess(max(p for p, _ in before), ack.first_position)
        self.assertGreaterEqual(min(p for p, _ in after), ack.end_position)
        # Interject: the turn goes on after the input, to max_tokens.
        self.assertEqual(len(before) + len(after), 64)
        c.send(close=pb.SessionClose())
        c.rest()
        self.assert_contiguous(c.events)
        self.assert_engine_idle()

    def test_greedy_session_equals_generate(self):
        tok = lambda text: list(self.stub.Tokenize(pb.TokenizeRequest(
            prompt=pb.Prompt(text=text))).token_ids)
        self.assertEqual(tok(SYSTEM + USER), tok(SYSTEM) + tok(USER))
        c = SessionClient(self.stub)
        self.open(c, max_tokens=24, ignore_eos=True)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        session_ids = [t for _, t in output_tokens(c.events)]
        session_text = "".join(e.tokens.text for e in c.events
                               if e.HasField("tokens"))
        c.send(close=pb.SessionClose())
        c.rest()
        gen_ids, gen_text = [], ""
        for r in self.stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=SYSTEM + USER),
                sampling=pb.SamplingParams(max_tokens=24, ignore_eos=True)),
                timeout=120):
            gen_ids += r.token_ids
            gen_text += r.text
        self.assertEqual(session_ids, gen_ids)
        self.assertEqual(session_text, gen_text)
        self.assert_engine_idle()

    def start_generating(self):
        c = SessionClient(self.stub)
        self.open(c, max_tokens=400, ignore_eos=True)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("tokens"))
        return c

    def test_cancel_frees_every_block(self):
        c = self.start_generating()
        c.send(cancel=True)
        with self.assertRaises(grpc.RpcError) as cm:
            c.rest()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.CANCELLED)
        self.assert_engine_idle()

    def test_close_frees_every_block(self):
        c = self.start_generating()
        c.send(close=pb.SessionClose())
        c.rest()  # OK
        ends = [e.turn_end for e in c.events if e.HasField("turn_end")]
        self.assertEqual(len(ends), 1)
        self.assertEqual(ends[0].info.finish_reason, pb.FINISH_REASON_CANCELLED)
        self.assert_contiguous(c.events)
        self.assert_engine_idle()

    def test_client_cancel_and_half_close_free_every_block(self):
        c = self.start_generating()
        c.call.cancel()
        self.assert_engine_idle()
        c = self.start_generating()
        c.half_close()
        c.rest()  # half-close closes the session: OK
        self.assert_engine_idle()

    def test_bad_first_message_is_invalid_argument(self):
        c = SessionClient(self.stub)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER)))
        with self.assertRaises(grpc.RpcError) as cm:
            c.rest()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("open", cm.exception.details())

        for streams, word in [
                (chat_streams() + [pb.StreamSpec(
                    stream_id="out", kind=pb.STREAM_KIND_OUTPUT)], "already"),
                ([pb.StreamSpec(stream_id="x")], "kind"),
                ([pb.StreamSpec(stream_id="x", kind=pb.STREAM_KIND_INPUT,
                                role=pb.STREAM_ROLE_OUTPUT)], "role"),
                ([pb.StreamSpec(stream_id="o", kind=pb.STREAM_KIND_OUTPUT,
                                sampling=pb.SamplingParams(top_k=-1))],
                 "streams[0].sampling.top_k")]:
            c = SessionClient(self.stub)
            c.send(open=pb.SessionOpen(prefix=pb.Prompt(text=SYSTEM),
                                       streams=streams))
            with self.assertRaises(grpc.RpcError) as cm:
                c.rest()
            self.assertEqual(cm.exception.code(),
                             grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(word, cm.exception.details())

        # After open, a bad action is an error event; the session goes on.
        c = SessionClient(self.stub)
        self.open(c, max_tokens=2, ignore_eos=True)
        c.send(append=pb.SessionAppend(stream_id="nope",
                                       input=pb.Prompt(text=USER)))
        ev = c.next()
        self.assertTrue(ev.HasField("error"), ev)
        self.assertEqual(ev.error.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        c.send(close=pb.SessionClose())
        c.rest()
        self.assert_contiguous(c.events)
        self.assert_engine_idle()


if __name__ == "__main__":
    harness.main()
