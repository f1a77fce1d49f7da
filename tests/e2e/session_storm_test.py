"""Session storm through the real daemon.

Many concurrent `Session` calls, each with 1-4 branch output streams and a
random duplex policy, doing one thing at random: a plain turn; cancel,
interrupt, a second append, or a second append and then an interrupt of
every output (under QUEUE the input waits for them) while the outputs
write; a client cancel; a
half-close; an append to a stream that does not exist; close (with or
without keep) in the middle of a turn; close with keep, then resume in a
new call and write a second turn. The KV pool is small and few sessions
may be kept, so kept sessions are evicted while others resume.

Generate calls (half of them cancelled) run beside them. Every session
call must keep the protocol: `opened` first, contiguous sequence
numbers, one acknowledgement per append (in order, at increasing
positions), increasing positions per stream, an error event (not a dead
call) for the bad append, a turn end for every output stream after the
last input, and the status its ending asks for (OK, CANCELLED, NOT_FOUND
for a resume whose session was evicted). Branches with the same sampling
write the same tokens, and some sessions, replayed alone afterwards, write
exactly what they wrote in the storm. Afterwards braidd's --stats_file
must show no session, no request and every KV block free, and the daemon
must still serve and exit cleanly. The same storm runs on SmolLM2 (1-4
branches) and on multistream_test's random multi-stream model in its
aligned and rows layouts (its output stream alone, as a branch or seeing
everything, or with its reasoning stream, the two seeing each other).

Usage: session_storm_test.py [--sessions=N] [--seed=S]
"""
import argparse
import concurrent.futures
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from multistream_test import write_model  # noqa: E402
from session_test import SessionClient  # noqa: E402

import grpc  # noqa: E402

pb = harness.load_stubs()[0]

ARGS = None
WORDS = harness.WORDS
ACTIONS = ("plain", "cancel", "interrupt", "late_append", "append_interrupt",
           "client_cancel", "half_close", "bad_append", "close_mid",
           "keep_resume", "generate")
POLICIES = (pb.DUPLEX_POLICY_INTERJECT, pb.DUPLEX_POLICY_INTERRUPT,
            pb.DUPLEX_POLICY_QUEUE)


def words(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


class Session:
    """A session of the storm: its plan, drawn from its own seed."""

    def __init__(self, i, rng, multi_stream):
        self.i = i
        self.rng = rng
        self.action = rng.choice(ACTIONS)
        if multi_stream:
            # The model's output stream, alone (as a branch or seeing
            # everything), or with its reasoning stream, each seeing the
            # other.
            self.k = rng.randint(1, 2)
            self.roles = [pb.STREAM_ROLE_OUTPUT, pb.STREAM_ROLE_REASONING]
            self.visibility = (pb.VISIBILITY_ALL if self.k == 2 else rng.choice(
                [pb.VISIBILITY_BRANCH, pb.VISIBILITY_ALL]))
        else:
            self.k = rng.randint(1, 4)
            self.roles = [pb.STREAM_ROLE_OUTPUT] * self.k
            self.visibility = pb.VISIBILITY_BRANCH
        self.outs = [f"o{j}" for j in range(self.k)]
        self.policy = rng.choice(POLICIES)
        self.prefix = words(rng, 1, 20).encode()
        sampling = dict(max_tokens=rng.randint(2, 12), ignore_eos=True)
        if rng.random() < 0.5:
            sampling.update(temperature=0.8, seed=rng.randrange(1 << 20))
        # The same sampling for every output: branches must write the same.
        self.sampling = pb.SamplingParams(**sampling)
        self.inputs = [words(rng, 1, 10).encode() for _ in range(2)]
        self.session_id = f"storm-{ARGS.seed}-{i}"
        self.appends = 0
        self.outcome = None

    def streams(self):
        s = [pb.StreamSpec(stream_id="user", role=pb.STREAM_ROLE_USER,
                           kind=pb.STREAM_KIND_INPUT)]
        return s + [pb.StreamSpec(stream_id=o, role=r,
                                  kind=pb.STREAM_KIND_OUTPUT,
                                  visibility=self.visibility,
                                  sampling=self.sampling)
                    for o, r in zip(self.outs, self.roles)]

    def append(self, call, text):
        self.appends += 1
        call.send(append=pb.SessionAppend(
            input_id=f"in{self.appends}", stream_id="user",
            input=pb.Prompt(text=text), generate_on=self.outs))


class SessionStormTest(harness.DaemonTestCase):
    # A multi-stream model binds one session stream to each of its streams
    # (Session above).
    MULTI_STREAM = False
    # ~24 sessions of up to ~100 entries want ~2400; the pool holds 384
    # (rows models place 4 entries a position: 768 and a longer context),
    # and at most 4 closed sessions are kept.
    DAEMON_FLAGS = ("--context_length=256", "--kv_budget_tokens=384")

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="session_storm_")
        cls.stats_path = os.path.join(cls.dir, "stats")
        cls.start_daemon(
            "--threads=2", *cls.DAEMON_FLAGS, "--max_num_seqs=16",
            "--max_sessions_per_client=64", "--max_kept_sessions=4",
            "--max_waiting_requests=5000", f"--stats_file={cls.stats_path}",
            model=cls.model())

    @classmethod
    def model(cls):
        return None  # $BRAID_MODEL

    def check_protocol(self, s, events):
        """The invariants every call's events keep."""
        tag = f"session {s.i} ({s.action})"
        self.assertTrue(events and events[0].HasField("opened"), tag)
        self.assertEqual([e.sequence_number for e in events],
                         list(range(len(events))), tag)
        acks = [e.ack for e in events if e.HasField("ack")]
        for a, b in zip(acks, acks[1:]):
            self.assertLessEqual(a.end_position, b.first_position, tag)
        for a in acks:
            self.assertEqual(a.end_position - a.first_position, a.num_tokens,
                             tag)
        last = {}
        for e in events:
            if e.HasField("tokens"):
                t = e.tokens
                self.assertIn(t.stream_id, s.outs, tag)
                self.assertGreater(t.first_position, last.get(t.stream_id, -1),
                                   tag)
                last[t.stream_id] = t.first_position + len(t.token_ids) - 1
        return acks

    def tokens(self, events):
        out = {}
        for e in events:
            if e.HasField("tokens"):
                out.setdefault(e.tokens.stream_id, []).extend(
                    e.tokens.token_ids)
        return out

    def turn(self, s, call, text, late=None):
        """Appends `text` and reads until every output stream ended its
        turn after the last input's acknowledgement (late(n_tokens) may act
        once tokens flow; it returns True to stop reading)."""
        s.append(call, text)
        ended, acks, n_tok = set(), 0, 0
        while True:
            ev = call.next()
            if ev.HasField("tokens"):
                n_tok += len(ev.tokens.token_ids)
                if late is not None and late(n_tok):
                    return False
            elif ev.HasField("ack"):
                acks += 1
                if acks == s.appends:
                    ended = set()
            elif ev.HasField("turn_end") and acks == s.appends:
                ended.add(ev.turn_end.stream_id)
                if ended == set(s.outs):
                    return True

    def generate(self, s):
        """A Generate call beside the sessions, half of them cancelled
        after their first tokens."""
        call = self.stub.Generate(pb.GenerateRequest(
            prompt=pb.Prompt(text=s.prefix + b" " + s.inputs[0]),
            sampling=s.sampling), timeout=120)
        cancel = s.rng.random() < 0.5
        n = 0
        try:
            for resp in call:
                n += len(resp.token_ids)
                if resp.HasField("final"):
                    self.assertEqual(n, s.sampling.max_tokens)
                    s.outcome = "ok"
                elif cancel and n > 0:
                    call.cancel()
        except grpc.RpcError as e:
            self.assertTrue(cancel, e.details())
            self.assertEqual(e.code(), grpc.StatusCode.CANCELLED, e.details())
            s.outcome = "cancelled"
        return s

    def run_session(self, s):
        if s.action == "generate":
            return self.generate(s)
        call = SessionClient(self.stub)
        call.send(open=pb.SessionOpen(
            session_id=s.session_id, prefix=pb.Prompt(text=s.prefix),
            streams=s.streams(), duplex_policy=s.policy))
        call.next()
        if s.action == "bad_append":
            call.send(append=pb.SessionAppend(input_id="bad", stream_id="nope",
                                              input=pb.Prompt(text=b"hi")))
        acted = []

        def late(n_tok):
            if acted or n_tok < 2:
                return False
            acted.append(n_tok)
            if s.action == "cancel":
                call.send(cancel=True)
                return True
            if s.action == "client_cancel":
                call.call.cancel()
                return True
            if s.action == "interrupt":
                call.send(interrupt_stream_id=s.outs[0])
            elif s.action == "late_append":
                s.append(call, s.inputs[1])
            elif s.action == "append_interrupt":
                # Under QUEUE the input waits for the turns the interrupts
                # end.
                s.append(call, s.inputs[1])
                for o in s.outs:
                    call.send(interrupt_stream_id=o)
            elif s.action == "close_mid":
                call.send(close=pb.SessionClose(keep=s.rng.random() < 0.5))
                call.half_close()
                return True
            return False

        try:
            finished = self.turn(s, call, s.inputs[0], late)
            if s.action in ("cancel", "client_cancel"):
                call.rest()
                self.fail(f"session {s.i}: {s.action} ended OK")
            elif s.action == "close_mid":
                call.rest()
                s.outcome = "closed"
            else:
                self.assertTrue(finished)
                if s.action == "half_close":
                    call.half_close()
                else:
                    call.send(close=pb.SessionClose(
                        keep=s.action == "keep_resume"))
                    call.half_close()
                call.rest()
                s.outcome = "ok"
        except grpc.RpcError as e:
            self.assertIn(s.action, ("cancel", "client_cancel"),
                          f"session {s.i}: {e.code()} {e.details()}")
            self.assertEqual(e.code(), grpc.StatusCode.CANCELLED, e.details())
            s.outcome = "cancelled"
            call.half_close()
        acks = self.check_protocol(s, call.events)
        if s.outcome == "ok":
            self.assertEqual(len(acks), s.appends, f"session {s.i}")
            s.written = self.tokens(call.events)
        if s.action == "bad_append":
            errors = [e.error for e in call.events if e.HasField("error")]
            self.assertEqual(len(errors), 1, f"session {s.i}")
            self.assertEqual(errors[0].code,
                             grpc.StatusCode.INVALID_ARGUMENT.value[0], errors[0])
        if s.action == "keep_resume" and s.outcome == "ok":
            self.resume(s)
        return s

    def resume(self, s):
        call = SessionClient(self.stub)
        call.send(open=pb.SessionOpen(session_id=s.session_id, resume=True))
        try:
            opened = call.next().opened
        except grpc.RpcError as e:
            # Evicted by the sessions kept after it.
            self.assertEqual(e.code(), grpc.StatusCode.NOT_FOUND, e.details())
            call.half_close()
            s.outcome = "evicted"
            return
        self.assertTrue(opened.resumed)
        s.appends = 0
        self.assertTrue(self.turn(s, call, s.inputs[1]))
        call.send(close=pb.SessionClose())
        call.half_close()
        call.rest()
        self.check_protocol(s, call.events)
        s.outcome = "resumed"

    def replay(self, s):
        """The same session alone: its turn's tokens."""
        call = SessionClient(self.stub)
        call.send(open=pb.SessionOpen(
            prefix=pb.Prompt(text=s.prefix), streams=s.streams(),
            duplex_policy=s.policy))
        call.next()
        s.appends = 0
        self.assertTrue(self.turn(s, call, s.inputs[0]))
        call.send(close=pb.SessionClose())
        call.half_close()
        call.rest()
        return self.tokens(call.events)

    def test_storm_keeps_the_protocol_and_leaves_nothing_behind(self):
        rng = random.Random(ARGS.seed)
        seeds = [rng.randrange(1 << 30) for _ in range(ARGS.sessions)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=24) as ex:
            done = list(ex.map(
                lambda i: self.run_session(
                    Session(i, random.Random(seeds[i]), self.MULTI_STREAM)),
                range(ARGS.sessions)))
        outcomes = {}
        for s in done:
            key = f"{s.action}:{s.outcome}"
            outcomes[key] = outcomes.get(key, 0) + 1
        print(f"{len(done)} sessions: {sorted(outcomes.items())}",
              file=sys.stderr)
        for a in ACTIONS:
            self.assertTrue(any(s.action == a for s in done), a)
        self.assertTrue(any(s.outcome == "cancelled" for s in done))
        self.assertTrue(any(s.outcome == "resumed" for s in done))

        # Branches with the same sampling write the same tokens.
        plain = [s for s in done if s.action in ("plain", "half_close",
                                                 "bad_append", "keep_resume")
                 and s.outcome in ("ok", "resumed", "evicted")]
        for s in plain:
            if s.visibility != pb.VISIBILITY_BRANCH:
                continue
            firsts = {tuple(s.written[o]) for o in s.outs}
            self.assertEqual(len(firsts), 1, f"session {s.i}: {s.written}")
        stats = harness.wait_engine_idle(self.stats_path, timeout=30)
        print(f"engine stats: {stats}", file=sys.stderr)
        self.assertEqual(stats["failed"], 0, stats)

        # Alone, a session writes what it wrote in the storm.
        for s in plain[:ARGS.replays]:
            self.assertEqual(self.replay(s), s.written, f"session {s.i}")
        harness.wait_engine_idle(self.stats_path, timeout=30)

        # Still serving.
        got = [len(r.token_ids) for r in self.stub.Generate(pb.GenerateRequest(
            prompt=pb.Prompt(text=b"Hello"),
            sampling=pb.SamplingParams(max_tokens=3, ignore_eos=True)))]
        self.assertEqual(sum(got), 3)


class AlignedModelStormTest(SessionStormTest):
    """The storm on a random multi-stream model (multistream_test's)."""
    MULTI_STREAM = True
    LAYOUT_FLAGS = ("--layout=aligned",)
    DAEMON_FLAGS = ("--context_length=256", "--kv_budget_tokens=384")

    @classmethod
    def model(cls):
        return write_model(cls.dir, "model.gguf", *cls.LAYOUT_FLAGS)


class RowsModelStormTest(AlignedModelStormTest):
    LAYOUT_FLAGS = ("--layout=rows", "--silence_token_id=3")
    DAEMON_FLAGS = ("--context_length=512", "--kv_budget_tokens=768")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replays", type=int, default=8)
    ARGS, rest = ap.parse_known_args()
    sys.argv = sys.argv[:1] + rest
    harness.main()
