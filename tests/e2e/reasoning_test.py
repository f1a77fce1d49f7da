"""The reasoning stream through the real daemon (docs/MULTISTREAM.md).

braidd runs SmolLM2 with two of its one-token specials as thinking markers
(--think_start=<jupyter_text>, --think_end=<jupyter_code>), and the prompt
opens thinking the way a reasoning model's chat template does (the
assistant header ends with the start marker). Generate sends the tokens up
to and including the end marker as STREAM_KIND_REASONING and the rest as
output; `reasoning_budget` forces the end marker after that many reasoning
tokens (without one the model, which never writes the marker, thinks to
max_tokens); `hide_reasoning` sends only the output, the same tokens, and
usage still counts the reasoning. A session's output stream with the same
sampling writes what Generate writes, kinds included, when its input opens
thinking; its next turn, after input without the marker, is output only,
and each turn end counts its own reasoning tokens.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from session_test import SessionClient, chat_streams  # noqa: E402

pb = harness.load_stubs()[0]

THINK_START, THINK_END = b"<jupyter_text>", b"<jupyter_code>"
SYSTEM = b"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
USER = (b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        b"<|im_start|>assistant\n" + THINK_START)
USER2 = b"<|im_end|>\n<|im_start|>user\nAnd of Italy?<|im_end|>\n"
TOKENS, BUDGET = 12, 4


class ReasoningTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_daemon("--threads=2", "--context_length=512",
                         f"--think_start={THINK_START.decode()}",
                         f"--think_end={THINK_END.decode()}")

    def token_id(self, text):
        ids = self.stub.Tokenize(pb.TokenizeRequest(
            prompt=pb.Prompt(text=text))).token_ids
        self.assertEqual(len(ids), 1, text)
        return ids[0]

    def generate(self, **sampling):
        """[(kind, token id)] and the final info of one greedy Generate."""
        out, final = [], None
        for r in self.stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=SYSTEM + USER),
                sampling=pb.SamplingParams(max_tokens=TOKENS, ignore_eos=True,
                                           **sampling)), timeout=120):
            out += [(r.stream, t) for t in r.token_ids]
            if r.HasField("final"):
                final = r.final
        self.assertIsNotNone(final)
        return out, final

    def test_generate_routes_reasoning_and_the_budget_ends_it(self):
        end = self.token_id(THINK_END)
        out, final = self.generate(reasoning_budget=BUDGET)
        kinds = [k for k, _ in out]
        self.assertEqual(kinds, [pb.STREAM_KIND_REASONING] * (BUDGET + 1) +
                         [pb.STREAM_KIND_OUTPUT] * (TOKENS - BUDGET - 1))
        self.assertEqual(out[BUDGET][1], end)  # forced
        self.assertNotIn(end, [t for _, t in out[:BUDGET]])
        self.assertEqual(final.usage.output_tokens, TOKENS)
        self.assertEqual(final.usage.reasoning_tokens, BUDGET + 1)

        # No budget: the model (which never writes the marker) thinks on.
        out, final = self.generate()
        self.assertEqual([k for k, _ in out], [pb.STREAM_KIND_REASONING] * TOKENS)
        self.assertEqual(final.usage.reasoning_tokens, TOKENS)

    def test_hidden_reasoning_sends_only_the_output(self):
        shown, _ = self.generate(reasoning_budget=BUDGET)
        hidden, final = self.generate(reasoning_budget=BUDGET,
                                      hide_reasoning=True)
        self.assertEqual(hidden, [(k, t) for k, t in shown
                                  if k == pb.STREAM_KIND_OUTPUT])
        self.assertEqual(final.usage.output_tokens, TOKENS)
        self.assertEqual(final.usage.reasoning_tokens, BUDGET + 1)

    def session_turns(self, **sampling):
        """Two turns of a one-stream session: the first after USER (which
        opens thinking), the second after USER2 (which does not). Returns
        per turn [(kind, token id)] and the turn end's usage."""
        c = SessionClient(self.stub)
        c.send(open=pb.SessionOpen(
            prefix=pb.Prompt(text=SYSTEM),
            streams=chat_streams(max_tokens=TOKENS, ignore_eos=True,
                                 **sampling)))
        c.next()
        turns = []
        for text in (USER, USER2):
            n = len(c.events)
            c.send(append=pb.SessionAppend(stream_id="user",
                                           input=pb.Prompt(text=text),
                                           generate_on=["out"]))
            end = c.until(lambda e: e.HasField("turn_end") or
                          e.HasField("error"))
            self.assertTrue(end.HasField("turn_end"), end)
            turns.append(([(e.tokens.stream, t) for e in c.events[n:]
                           if e.HasField("tokens") for t in e.tokens.token_ids],
                          end.turn_end.info.usage))
        c.send(close=pb.SessionClose())
        c.rest()
        return turns

    def test_session_input_opens_thinking_like_a_generate_prompt(self):
        expected, final = self.generate(reasoning_budget=BUDGET)
        (first, usage1), (second, usage2) = self.session_turns(
            reasoning_budget=BUDGET)
        self.assertEqual(first, expected)
        self.assertEqual(usage1.reasoning_tokens, final.usage.reasoning_tokens)
        self.assertEqual([k for k, _ in second],
                         [pb.STREAM_KIND_OUTPUT] * TOKENS)
        self.assertEqual(usage2.output_tokens, TOKENS)
        self.assertEqual(usage2.reasoning_tokens, 0)

        (hidden, usage), _ = self.session_turns(reasoning_budget=BUDGET,
                                                hide_reasoning=True)
        self.assertEqual(hidden, [(k, t) for k, t in expected
                                  if k == pb.STREAM_KIND_OUTPUT])
        self.assertEqual(usage.reasoning_tokens, BUDGET + 1)


if __name__ == "__main__":
    harness.main()
