"""A multi-stream model served by the real daemon (docs/MULTISTREAM.md).

model/testing:write_random_llama writes a tiny random-weight Llama with
braid.streams.* keys (4 streams: system, user, reasoning, output; a stream
embedding table) and SmolLM2's tokenizer; braidd serves it. Every test runs
twice: on an "aligned" model and on a "rows" model (silence token 3).
GetModelInfo reports its streams; a session binds its streams to the model's
by role, VISIBILITY_UNSPECIFIED means ALL and a lone BRANCH output writes
what ALL writes, input sent while the output stream writes is acknowledged
at the step the output was about to write (the output's positions go on
without a gap, beside the input), an idle session adds no positions (the
next input lands right after the last output token), and cancel / close
free every KV block (--stats_file). Bad bindings are INVALID_ARGUMENT naming
the field. The rows model also serves Generate.
"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from session_test import SessionClient, output_tokens  # noqa: E402

import grpc  # noqa: E402

pb = harness.load_stubs()[0]

ROLES = ["system", "user", "reasoning", "output"]
SYSTEM = b"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
USER = (b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        b"<|im_start|>assistant\n")
LATE = b" Answer in one word."
# Room in --context_length=512 for the prefix, both inputs and the output.
MAX_TOKENS = 400


def write_model(directory, name, *flags):
    """A random multi-stream GGUF with $BRAID_MODEL's tokenizer."""
    source = harness.require_env(
        "BRAID_MODEL",
        "path of SmolLM2-135M-Instruct.Q4_1.gguf (`make test` sets it)")
    path = os.path.join(directory, name)
    subprocess.run([harness.runfile("model/testing/write_random_llama"),
                    f"--out={path}", f"--tokenizer_from={source}",
                    f"--roles={','.join(ROLES)}", *flags], check=True)
    return path


def spec(stream_id, role, kind, visibility=pb.VISIBILITY_UNSPECIFIED,
         **sampling):
    s = pb.StreamSpec(stream_id=stream_id, role=role, kind=kind,
                      visibility=visibility)
    if sampling:
        s.sampling.CopyFrom(pb.SamplingParams(**sampling))
    return s


def chat_streams(visibility=pb.VISIBILITY_ALL, max_tokens=MAX_TOKENS):
    return [spec("user", pb.STREAM_ROLE_USER, pb.STREAM_KIND_INPUT),
            spec("out", pb.STREAM_ROLE_OUTPUT, pb.STREAM_KIND_OUTPUT,
                 visibility, max_tokens=max_tokens, ignore_eos=True)]


class MultiStreamTest(harness.DaemonTestCase):
    LAYOUT = "aligned"
    SILENCE = -1  # no silence token
    MODEL_FLAGS = ()
    # Rows models place 4 entries per position: more context for the same
    # number of output tokens.
    DAEMON_FLAGS = ("--context_length=512", "--kv_budget_tokens=2048")

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=f"multistream_{cls.LAYOUT}_")
        cls.stats_path = os.path.join(cls.dir, "stats")
        cls.start_daemon(
 "--threads=2", *cls.DAEMON_FLAGS,
 f"--stats_file={cls.stats_path}",
 model=write_model(cls.dir, f"{cls.LAYOUT}.gguf",
                   f"--layout={cls.LAYOUT}", *cls.MODEL_FLAGS))

    def ntok(self, text):
        return len(self.stub.Tokenize(pb.TokenizeRequest(
            prompt=pb.Prompt(text=text))).token_ids)

    def open(self, client, streams):
        client.send(open=pb.SessionOpen(prefix=pb.Prompt(text=SYSTEM),
                                        streams=streams))
        ev = client.next()
        self.assertTrue(ev.HasField("opened"), ev)
        return ev.opened

    def open_error(self, streams):
        """The status code and message `open` with `streams` ends with."""
        c = SessionClient(self.stub)
        c.send(open=pb.SessionOpen(prefix=pb.Prompt(text=SYSTEM),
                                   streams=streams))
        with self.assertRaises(grpc.RpcError) as cm:
            c.rest()
        self.assertEqual(c.events, [])
        return cm.exception.code(), cm.exception.details()

    def start_generating(self, streams=None):
        c = SessionClient(self.stub)
        opened = self.open(c, streams or chat_streams())
        c.send(append=pb.SessionAppend(input_id="q1", stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("tokens"))
        return c, opened

    def test_model_info_reports_the_streams(self):
        info = self.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
        self.assertEqual(info.num_streams, 4)
        self.assertEqual(list(info.stream_roles), ROLES)
        self.assertEqual(info.stream_layout, self.LAYOUT)
        self.assertEqual(info.silence_token_id, self.SILENCE)
        self.assertEqual(info.vocab_size, 49152)

    def test_input_while_writing_lands_at_the_current_step(self):
        c, opened = self.start_generating()
        y0 = opened.prefix_length
        self.assertEqual(y0, self.ntok(SYSTEM))
        c.send(append=pb.SessionAppend(input_id="q2", stream_id="user",
                                       input=pb.Prompt(text=LATE)))
        c.until(lambda e: e.HasField("ack") and e.ack.input_id == "q2")
        # Some output after the input landed, then close mid-turn.
        n = len(c.events)
        c.until(lambda e: len(output_tokens(c.events[n:])) >= 4)
        c.send(close=pb.SessionClose())
        c.rest()  # OK
        acks = {e.ack.input_id: (i, e.ack) for i, e in enumerate(c.events)
                if e.HasField("ack")}
        _, q1 = acks["q1"]
        self.assertEqual(q1.stream_id, "user")
        self.assertEqual(q1.first_position, y0)
        self.assertEqual(q1.end_position, y0 + self.ntok(USER))
        idx, q2 = acks["q2"]
        self.assertEqual(q2.num_tokens, self.ntok(LATE))
        self.assertEqual(q2.end_position - q2.first_position, q2.num_tokens)
        before = output_tokens(c.events[:idx])
        after = output_tokens(c.events[idx:])
        self.assertTrue(before)
        self.assertTrue(after, "the turn ended before the input landed")
        # The output writes from after the first input, one position per
        # token, with no gap where the late input landed (the linear layout
        # of a single-stream model would skip past it).
        positions = [p for p, _ in before + after]
        self.assertEqual(positions, list(range(
            q1.end_position, q1.end_position + len(positions))))
        # The late input landed at the step the output was about to write:
        # after every token written before its ack, at the next one.
        self.assertEqual(q2.first_position, before[-1][0] + 1)
        self.assertEqual(after[0][0], q2.first_position)
        ends = [e.turn_end for e in c.events if e.HasField("turn_end")]
        self.assertEqual(len(ends), 1)
        self.assertEqual(ends[0].info.finish_reason, pb.FINISH_REASON_CANCELLED)
        self.assertEqual([e.sequence_number for e in c.events],
                         list(range(len(c.events))))
        harness.wait_engine_idle(self.stats_path)

    def test_unspecified_visibility_is_all(self):
        # A lone BRANCH output sees everything there is (the prefix and the
        # input; nothing else writes), so it writes what ALL writes.
        outputs = []
        for visibility in (pb.VISIBILITY_UNSPECIFIED, pb.VISIBILITY_ALL,
                           pb.VISIBILITY_BRANCH):
            c = SessionClient(self.stub)
            self.open(c, chat_streams(visibility, max_tokens=12))
            c.send(append=pb.SessionAppend(stream_id="user",
                                           input=pb.Prompt(text=USER),
                                           generate_on=["out"]))
            c.until(lambda e: e.HasField("turn_end"))
            c.send(close=pb.SessionClose())
            c.rest()
            outputs.append(output_tokens(c.events))
        self.assertEqual(len(outputs[0]), 12)
        self.assertEqual(outputs[0], outputs[1])
        self.assertEqual(outputs[0], outputs[2])
        harness.wait_engine_idle(self.stats_path)

    def test_idle_session_adds_no_positions(self):
        c = SessionClient(self.stub)
        self.open(c, chat_streams(max_tokens=6))
        c.send(append=pb.SessionAppend(input_id="q1", stream_id="user",
                                       input=pb.Prompt(text=USER),
                                       generate_on=["out"]))
        c.until(lambda e: e.HasField("turn_end"))
        last = output_tokens(c.events)[-1][0]
        c.send(append=pb.SessionAppend(input_id="q2", stream_id="user",
                                       input=pb.Prompt(text=LATE)))
        c.until(lambda e: e.HasField("ack") and e.ack.input_id == "q2")
        q2 = c.events[-1].ack
        self.assertEqual(q2.first_position, last + 1)
        self.assertEqual(q2.end_position, last + 1 + self.ntok(LATE))
        c.send(close=pb.SessionClose())
        c.rest()  # OK
        harness.wait_engine_idle(self.stats_path)

    def test_bad_bindings_name_the_field(self):
        user = spec("user", pb.STREAM_ROLE_USER, pb.STREAM_KIND_INPUT)
        cases = [
            ([spec("tool", pb.STREAM_ROLE_TOOL, pb.STREAM_KIND_INPUT)],
             'open.streams[0].role: the model has no "tool" stream'),
            ([user, spec("again", pb.STREAM_ROLE_USER, pb.STREAM_KIND_INPUT)],
             "open.streams[1]: model stream 1"),
            ([spec(f"in{i}", pb.STREAM_ROLE_UNSPECIFIED, pb.STREAM_KIND_INPUT)
              for i in range(5)],
             "open.streams: 5 streams, but the model has 4"),
        ]
        for streams, want in cases:
            code, details = self.open_error(streams)
            self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
            self.assertIn(want, details)
        harness.wait_engine_idle(self.stats_path)

    def test_cancel_frees_every_block(self):
        c, _ = self.start_generating()
        c.send(cancel=True)
        with self.assertRaises(grpc.RpcError) as cm:
            c.rest()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.CANCELLED)
        harness.wait_engine_idle(self.stats_path)

    def test_close_frees_every_block(self):
        c, _ = self.start_generating()
        c.send(close=pb.SessionClose())
        c.rest()  # OK
        ends = [e.turn_end for e in c.events if e.HasField("turn_end")]
        self.assertEqual(len(ends), 1)
        self.assertEqual(ends[0].info.finish_reason, pb.FINISH_REASON_CANCELLED)
        harness.wait_engine_idle(self.stats_path)


class RowsModelTest(MultiStreamTest):
    """The same on a "rows" model: every stream at every position."""
    LAYOUT = "rows"
    SILENCE = 3
    MODEL_FLAGS = ("--silence_token_id=3",)
    DAEMON_FLAGS = ("--context_length=2048", "--kv_budget_tokens=8192")

    def test_generate_works(self):
        ids = []
        for r in self.stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=SYSTEM),
                sampling=pb.SamplingParams(max_tokens=4, ignore_eos=True)),
                timeout=60):
            ids += r.token_ids
        self.assertEqual(len(ids), 4)
        harness.wait_engine_idle(self.stats_path)


if __name__ == "__main__":
    harness.main()
