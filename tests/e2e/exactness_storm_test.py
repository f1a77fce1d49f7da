"""Generate is exact under load, through the real daemon.

Many concurrent Generate calls with random sampling (greedy or seeded
temperature with top-k / top-p / min-p, repetition, frequency and presence
penalties, stop strings, log-probabilities with and without top
alternatives, ignore_eos or not), a third of them sharing a prompt prefix
(prefix cache hits), against a KV pool so small that the engine preempts
and recomputes. Preemption does not depend on how the storm's calls happen
to overlap: before the storm, two long greedy requests start one after the
other (the second once the first has streamed a token), and together they
outgrow the pool while both run. Afterwards each request runs again alone: its tokens,
text, log-probabilities (bit for bit, top alternatives included), finish
reason, matched stop and usage must equal what it got in the storm
(batch invariance and determinism, docs/ARCHITECTURE.md).

Usage: exactness_storm_test.py [--requests=N] [--seed=S]
"""
import argparse
import concurrent.futures
import json
import os
import random
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

pb = harness.load_stubs()[0]

ARGS = None
WORDS = harness.WORDS


def request(rng):
    sp = harness.random_sampling(rng)
    shared = ("Shared preamble: " + " ".join(WORDS) + ". "
              if rng.random() < 0.35 else "")
    text = shared + " ".join(rng.choice(WORDS)
                             for _ in range(rng.randint(1, 30)))
    return pb.GenerateRequest(prompt=pb.Prompt(text=text.encode()),
                              sampling=pb.SamplingParams(**sp))


class ExactnessStormTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        cls.start_daemon(
            "--threads=2", "--context_length=128",
            # 16 running requests of up to ~90 tokens want ~1400 entries;
            # the pool holds 160 (10 blocks), so the engine preempts.
            "--kv_budget_tokens=160", "--max_num_seqs=16",
            "--max_waiting_requests=5000", f"--stats_file={cls.stats_path}")

    def run_one(self, req, on_first=None):
        """Everything a client sees of one call; `on_first` is called at
        its first response."""
        tokens, logprobs, text, final = [], [], "", None
        for r in self.stub.Generate(req, timeout=300):
            if on_first is not None:
                on_first()
                on_first = None
            tokens += list(r.token_ids)
            text += r.text
            logprobs += harness.logprob_tuples(r.logprobs)
            if r.HasField("final"):
                u = r.final.usage
                final = (r.final.finish_reason, r.final.matched_stop,
                         u.prompt_tokens, u.output_tokens)
        self.assertIsNotNone(final)
        return tokens, logprobs, text, final

    def start(self, req):
        """Runs `req` on a thread; returns once it has streamed a token."""
        first = threading.Event()
        out = []
        t = threading.Thread(
            target=lambda: out.append(self.run_one(req, first.set)))
        t.start()
        harness.wait_for(first.is_set, 300, "a long request's first token")
        return t, out

    def test_storm_equals_each_request_alone(self):
        rng = random.Random(ARGS.seed)
        reqs = [request(random.Random(rng.randrange(1 << 30)))
                for _ in range(ARGS.requests)]
        # Two long requests (about 110 entries, 7 of the 10 blocks, each):
        # the second starts while the first has most of its tokens to go,
        # so when the first reaches its end the second holds at least 4
        # blocks, and the pool cannot hold both.
        long = [pb.GenerateRequest(
            prompt=pb.Prompt(text=" ".join(WORDS[i:i + 6]).encode()),
            sampling=pb.SamplingParams(max_tokens=100, ignore_eos=True))
            for i in (0, 6)]
        started = [self.start(r) for r in long]
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as ex:
            storm = list(ex.map(self.run_one, reqs))
        for t, _ in started:
            t.join()
        reqs += long
        storm += [out[0] for _, out in started]
        with open(self.stats_path) as f:
            stats = json.load(f)
        print(f"engine stats after the storm: {stats}", file=sys.stderr)
        self.assertGreater(stats["preemptions"], 0, stats)
        self.assertGreater(stats["prefix_hit_tokens"], 0, stats)
        for i, req in enumerate(reqs):
            self.assertEqual(self.run_one(req), storm[i],
                             f"request {i}: {req.sampling}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ARGS, rest = ap.parse_known_args()
    sys.argv = sys.argv[:1] + rest
    harness.main()
