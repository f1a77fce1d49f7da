"""The Session RPC (full-duplex multi-stream sessions) through the real daemon.

Opens sessions over gRPC with a Python client: input is acknowledged with
the positions where it landed, output streams, input appended while the
model writes lands after the tokens already written, a one-stream greedy
session equals Generate for the same text (and so do 40 random sampling
settings, penalties and log-probabilities included), and cancel / close /
client cancel / half-close leave no session and no KV block behind
(--stats_file).
close {keep} then open {resume} computes only the new turn's tokens and
writes what a session never closed writes; stop strings end a turn like
Generate's; the context length bounds a session; an idle session is kept
and its call ends DEADLINE_EXCEEDED; sessions per client are limited (by
bearer token); Session calls count in braid_rpcs_total.
"""
import json
import os
import queue
import random
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb = harness.load_stubs()[0]

SYSTEM = b"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
USER = (b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        b"<|im_start|>assistant\n")
USER2 = (b"<|im_end|>\n<|im_start|>user\nAnd of Italy?<|im_end|>\n"
         b"<|im_start|>assistant\n")


class SessionClient:
    """One Session call fed from a queue; events are read one at a time."""

    def __init__(self, stub, timeout=120, metadata=None):
        self.requests = queue.Queue()

        def gen():
            while True:
                m = self.requests.get()
                if m is None:
                    return
                yield m

        self.call = stub.Session(gen(), timeout=timeout, metadata=metadata)
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


def rpc_count(daemon, method, code):
    return daemon.rpc_count(method, code)


def turn_text(events, stream_id="out"):
    return "".join(e.tokens.text for e in events
                   if e.HasField("tokens") and e.tokens.stream_id == stream_id)


def output_tokens(events, stream_id="out"):
    """[(position, token id)] of one stream's token events."""
    out = []
    for ev in events:
        if ev.HasField("tokens") and ev.tokens.stream_id == stream_id:
            for i, t in enumerate(ev.tokens.token_ids):
                out.append((ev.tokens.first_position + i, t))
    return out


class SessionTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        cls.start_daemon("--threads=2", "--context_length=512",
                         "--kv_budget_tokens=1024",
                         f"--stats_file={cls.stats_path}")

    def assert_engine_idle(self):
        """Waits (10 s at most) for no session, no request and every KV
        block free, as --stats_file reports."""
        return harness.wait_engine_idle(self.stats_path)

    def stats(self):
        while True:
            try:
                with open(self.stats_path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                time.sleep(0.05)

    def wait_computed(self, n):
        """Waits until the engine has computed `n` tokens since start."""
        harness.wait_for(lambda: self.stats()["computed_tokens"] >= n, 30,
                         f"{n} tokens computed")
        self.assertEqual(self.stats()["computed_tokens"], n)

    def ntok(self, text):
        return len(self.stub.Tokenize(pb.TokenizeRequest(
            prompt=pb.Prompt(text=text))).token_ids)

    def open(self, client, session_id="", **sampling):
        client.send(open=pb.SessionOpen(session_id=session_id,
                                        prefix=pb.Prompt(text=SYSTEM),
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

    def test_sampled_sessions_equal_generate(self):
        """40 random sampling settings: a session's turn equals Generate over
        the same text (tokens, text, log-probabilities bit for bit, finish,
        usage): penalties count the input as Generate's count the prompt."""
        rng = random.Random(5)
        words = "apple river stone cloud north quiet seven market lamp".split()
        for i in range(40):
            sp = harness.random_sampling(rng)
            user = (b"<|im_start|>user\n" +
                    " ".join(rng.choice(words)
                             for _ in range(rng.randint(1, 20))).encode() +
                    b"<|im_end|>\n<|im_start|>assistant\n")
            c = SessionClient(self.stub)
            self.open(c, **sp)
            c.send(append=pb.SessionAppend(stream_id="user",
                                           input=pb.Prompt(text=user),
                                           generate_on=["out"]))
            end = c.until(lambda e: e.HasField("turn_end")).turn_end.info
            got = ([t for _, t in output_tokens(c.events)], turn_text(c.events),
                   [lp for e in c.events if e.HasField("tokens")
                    for lp in harness.logprob_tuples(e.tokens.logprobs)],
                   (end.finish_reason, end.matched_stop,
                    end.usage.output_tokens))
            c.send(close=pb.SessionClose())
            c.rest()
            ids, text, lps, final = [], "", [], None
            for r in self.stub.Generate(pb.GenerateRequest(
                    prompt=pb.Prompt(text=SYSTEM + user),
                    sampling=pb.SamplingParams(**sp)), timeout=120):
                ids += r.token_ids
                text += r.text
                lps += harness.logprob_tuples(r.logprobs)
                if r.HasField("final"):
                    final = (r.final.finish_reason, r.final.matched_stop,
                             r.final.usage.output_tokens)
            self.assertEqual(got, (ids, text, lps, final), f"case {i}: {sp}")
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

    def two_turns(self, c, keep_between=False, session_id=""):
        """Turn 1 (settled: every entry computed), optionally close with
        keep and resume; then turn 2. Returns turn 2's events and the
        client that ran it."""
        base = self.stats()["computed_tokens"]
        self.open(c, session_id=session_id, max_tokens=8, ignore_eos=True)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        turn1 = self.ntok(SYSTEM) + self.ntok(USER) + 8
        self.wait_computed(base + turn1)
        if keep_between:
            c.send(close=pb.SessionClose(keep=True))
            c.rest()  # OK
            stats = self.assert_engine_idle()  # kept blocks are free
            self.assertEqual(stats["kept_sessions"], 1)
            c = SessionClient(self.stub)
            c.send(open=pb.SessionOpen(session_id=session_id, resume=True))
            opened = c.next().opened
            self.assertTrue(opened.resumed)
            self.assertEqual(opened.session_id, session_id)
            self.assertEqual(opened.context_tokens, turn1)
        before = self.stats()
        n = len(c.events)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER2),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        # Only the new turn is computed; the rest came from the cache.
        self.wait_computed(before["computed_tokens"] + self.ntok(USER2) + 8)
        if keep_between:
            self.assertEqual(self.stats()["prefix_hit_tokens"]
                             - before["prefix_hit_tokens"], turn1)
        return c.events[n:], c

    def test_keep_then_resume_continues_exactly(self):
        never_closed, c = self.two_turns(SessionClient(self.stub))
        c.send(close=pb.SessionClose())
        c.rest()
        resumed, c = self.two_turns(SessionClient(self.stub),
                                    keep_between=True, session_id="k1")
        self.assertEqual(output_tokens(resumed), output_tokens(never_closed))
        self.assertEqual(turn_text(resumed), turn_text(never_closed))
        # Resuming needs a kept session of this client, nothing else.
        for open_msg, code in [
                (pb.SessionOpen(session_id="k1", resume=True),
                 grpc.StatusCode.FAILED_PRECONDITION),  # open right now
                (pb.SessionOpen(session_id="nope", resume=True),
                 grpc.StatusCode.NOT_FOUND),
                (pb.SessionOpen(session_id="k1", resume=True,
                                prefix=pb.Prompt(text=SYSTEM)),
                 grpc.StatusCode.INVALID_ARGUMENT)]:
            other = SessionClient(self.stub)
            other.send(open=open_msg)
            with self.assertRaises(grpc.RpcError) as cm:
                other.rest()
            self.assertEqual(cm.exception.code(), code,
                             cm.exception.details())
        c.send(close=pb.SessionClose())
        c.rest()
        stats = self.assert_engine_idle()
        self.assertEqual(stats["kept_sessions"], 0)
        self.assertGreater(rpc_count(self.daemon, "Session", "OK"), 0)
        self.assertGreater(rpc_count(self.daemon, "Session", "NOT_FOUND"), 0)

    def test_stop_string_ends_the_turn_like_generate(self):
        def generate(stop):
            out = list(self.stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=SYSTEM + USER),
                sampling=pb.SamplingParams(max_tokens=24, ignore_eos=True,
                                           stop=stop)), timeout=120))
            return ([t for r in out for t in r.token_ids],
                    "".join(r.text for r in out), out[-1].final)
        _, full, _ = generate([])
        stop = full[len(full) // 2:len(full) // 2 + 3].encode()
        ids, text, final = generate([stop])
        self.assertEqual(final.finish_reason, pb.FINISH_REASON_STOP)
        c = SessionClient(self.stub)
        self.open(c, max_tokens=24, ignore_eos=True, stop=[stop])
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        end = c.until(lambda e: e.HasField("turn_end")).turn_end
        self.assertEqual(end.info.finish_reason, pb.FINISH_REASON_STOP)
        self.assertEqual(end.info.matched_stop, final.matched_stop)
        self.assertEqual(end.info.matched_stop.encode(), stop)
        self.assertEqual([t for _, t in output_tokens(c.events)], ids)
        self.assertEqual(turn_text(c.events), text)
        self.assertNotIn(stop.decode(), turn_text(c.events))
        c.send(close=pb.SessionClose())
        c.rest()
        self.assert_engine_idle()

    def test_context_length_bounds_the_session(self):
        c = SessionClient(self.stub)
        opened = self.open(c, ignore_eos=True)  # max_tokens: the default
        chunk = b" the quick brown fox jumps over the lazy dog" * 20
        n = self.ntok(chunk)
        y0 = opened.prefix_length
        self.assertLess(y0 + 2 * n + self.ntok(USER), 512)
        self.assertGreater(y0 + 3 * n, 512)
        for i in range(3):  # the third would overflow 512
            c.send(append=pb.SessionAppend(input_id=f"a{i}", stream_id="user",
                                           input=pb.Prompt(text=chunk)))
        acks = [c.next() for _ in range(2)]
        self.assertTrue(all(e.HasField("ack") for e in acks), acks)
        err = c.next()
        self.assertTrue(err.HasField("error"), err)
        self.assertEqual(err.error.code, grpc.StatusCode.OUT_OF_RANGE.value[0])
        self.assertIn("--context_length", err.error.message)
        # The session goes on; a turn that fills the context ends LENGTH.
        c.send(append=pb.SessionAppend(input_id="q", stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        end = c.until(lambda e: e.HasField("turn_end")).turn_end
        ack = next(e.ack for e in c.events if e.HasField("ack")
                   and e.ack.input_id == "q")
        self.assertEqual(ack.first_position, y0 + 2 * n)
        self.assertEqual(end.info.finish_reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(ack.end_position + end.info.usage.output_tokens, 512)
        c.send(close=pb.SessionClose())
        c.rest()
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


class SessionLimitsTest(harness.DaemonTestCase):
    """--session_idle_timeout_s and --max_sessions_per_client, with clients
    told apart by their bearer tokens."""

    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp()
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("alpha\nbeta\n")
        cls.start_daemon("--threads=2", "--context_length=512",
                         "--kv_budget_tokens=1024",
                         f"--auth_token_file={tokens}",
                         "--session_idle_timeout_s=2",
                         "--max_sessions_per_client=2")

    def client(self, token):
        return SessionClient(self.stub, metadata=[
            ("authorization", f"Bearer {token}")])

    def open(self, token, session_id="", resume=False):
        c = self.client(token)
        if resume:
            c.send(open=pb.SessionOpen(session_id=session_id, resume=True))
        else:
            c.send(open=pb.SessionOpen(
                session_id=session_id, prefix=pb.Prompt(text=SYSTEM),
                streams=chat_streams(max_tokens=4, ignore_eos=True)))
        return c

    def assert_fails(self, c, code, word):
        with self.assertRaises(grpc.RpcError) as cm:
            c.rest()
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertIn(word, cm.exception.details())

    def test_sessions_per_client(self):
        a1, a2 = self.open("alpha"), self.open("alpha")
        self.assertTrue(a1.next().HasField("opened"))
        self.assertTrue(a2.next().HasField("opened"))
        self.assert_fails(self.open("alpha"),
                          grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "--max_sessions_per_client")
        b = self.open("beta")  # another client
        self.assertTrue(b.next().HasField("opened"))
        for c in (a1, a2, b):
            c.send(close=pb.SessionClose())
            try:
                c.rest()
            except grpc.RpcError as e:  # a slow machine: idle already
                self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertGreater(
            rpc_count(self.daemon, "Session", "RESOURCE_EXHAUSTED"), 0)

    def test_idle_session_is_kept_and_resumed(self):
        c = self.open("alpha", session_id="idle1")
        self.assertTrue(c.next().HasField("opened"))
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        # Nothing more from the client: after 2 s the call ends, kept.
        self.assert_fails(c, grpc.StatusCode.DEADLINE_EXCEEDED,
                          "--session_idle_timeout_s")
        # Only its own client may resume it.
        self.assert_fails(self.open("beta", "idle1", resume=True),
                          grpc.StatusCode.NOT_FOUND, "idle1")
        c = self.open("alpha", "idle1", resume=True)
        self.assertTrue(c.next().opened.resumed)
        c.send(append=pb.SessionAppend(stream_id="user",
                                       input=pb.Prompt(text=USER2),
                                       generate_on=["out"]))
        end = c.until(lambda e: e.HasField("turn_end")).turn_end
        self.assertEqual(end.info.usage.output_tokens, 4)
        c.send(close=pb.SessionClose())
        c.rest()
        self.assertGreater(
            rpc_count(self.daemon, "Session", "DEADLINE_EXCEEDED"), 0)


if __name__ == "__main__":
    harness.main()
