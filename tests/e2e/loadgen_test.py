"""The load generator (tools/loadgen) against a real braidd, so it cannot rot.

Runs the CLI for a few requests (fixed concurrency, then Poisson arrivals) and
a scaled-down stream-isolation scenario, and checks the records add up: every
request completes with exactly its output length, and the metrics are sane.
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness

LOADGEN = harness.runfile("tools/loadgen/loadgen.py")


class LoadgenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = harness.Daemon("--threads=2", "--max_num_seqs=4",
                                    "--context_length=1024")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def run_cli(self, *flags):
        out = os.path.join(tempfile.mkdtemp(prefix="loadgen_"), "out.json")
        p = subprocess.run([sys.executable, LOADGEN, "--backend", "braid",
                            "--addr", self.daemon.addr, "--json", out, *flags],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("Output token throughput", p.stdout)
        with open(out) as f:
            return json.load(f)

    def check_run(self, d, n, prompt_len, output_len):
        s = d["summary"]
        self.assertEqual((s["completed"], s["failed"]), (n, 0), d["errors"])
        self.assertEqual(s["total_input_tokens"], n * prompt_len)
        self.assertEqual(s["total_output_tokens"], n * output_len)
        for r in d["requests"]:
            self.assertTrue(r["ok"])
            self.assertEqual(r["output_tokens"], output_len)
            self.assertEqual(sum(r["chunk_tokens"]), output_len)
            self.assertEqual(len(r["itl"]), len(r["chunk_times"]) - 1)
            self.assertGreater(r["ttft"], 0)
            self.assertGreaterEqual(r["latency"], r["ttft"])
        self.assertGreater(s["output_throughput"], 0)
        self.assertGreater(s["median_itl_ms"], 0)
        self.assertGreaterEqual(s["p99_itl_ms"], s["median_itl_ms"])
        self.assertGreaterEqual(s["p99_ttft_ms"], s["median_ttft_ms"])

    def test_fixed_concurrency(self):
        d = self.run_cli("--concurrency", "2", "--num-prompts", "4",
                         "--prompt-len", "24", "--output-len", "8",
                         "--slo-ttft", "60000", "--slo-tpot", "60000")
        self.check_run(d, 4, 24, 8)
        self.assertEqual(d["summary"]["good_requests"], 4)

    def test_poisson_arrivals_and_prompt_file(self):
        path = os.path.join(tempfile.mkdtemp(prefix="loadgen_"), "prompts.txt")
        with open(path, "w") as f:
            f.write("The capital of France is\nOnce upon a time\n")
        d = self.run_cli("--request-rate", "20", "--num-prompts", "3",
                         "--prompt-file", path, "--output-len", "6")
        s = d["summary"]
        self.assertEqual((s["completed"], s["total_output_tokens"]), (3, 18), d["errors"])
        self.assertGreater(s["total_input_tokens"], 0)

    def test_isolation_scenario(self):
        sys.path.insert(0, os.path.dirname(LOADGEN))
        import loadgen
        from backends import BraidBackend

        async def go():
            b = BraidBackend(self.daemon.addr, harness.runfile("proto/braid/v1/braid.proto"))
            try:
                return await loadgen.isolation(
                    b, streams=2, stream_prompt_len=16, stream_output_len=600,
                    long_prompt_len=128, long_output_len=2, steady_tokens=4,
                    baseline_s=0.5, tail_s=0.1, timeout_s=120)
            finally:
                await b.close()
        r = asyncio.run(go())
        self.assertEqual(r["errors"], [])
        self.assertTrue(r["long_request_ok"])
        self.assertTrue(r["streams_decoding_throughout"])
        self.assertEqual(r["long_prompt_tokens"], 128)
        self.assertGreater(r["baseline_gaps"], 0)
        self.assertGreater(r["prefill_gaps"], 0)
        self.assertIsNotNone(r["itl_p99_ratio"])


if __name__ == "__main__":
    harness.main()
