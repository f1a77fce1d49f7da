"""Unit tests of the serving-metric arithmetic (vLLM's definitions).

Hand-built request records with known arrival times; every expected figure is
worked out in the comments. Runs under Bazel (//tools/loadgen:metrics_test)
or directly: python3 tools/loadgen/metrics_test.py
"""
import asyncio
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import metrics  # noqa: E402
from backends import OpenAIBackend, Request  # noqa: E402
from metrics import RequestResult  # noqa: E402


def record(start, arrivals, tokens=None, prompt=10, ok=True):
    """A request sent at `start` whose output chunks arrived at `arrivals`."""
    r = RequestResult(ok=ok, prompt_tokens=prompt, start=start)
    tokens = tokens or [1] * len(arrivals)
    for t, n in zip(arrivals, tokens):
        r.add_chunk(t, n)
    r.output_tokens = sum(tokens)
    return r


class PercentileTest(unittest.TestCase):
    def test_matches_numpy_linear_interpolation(self):
        xs = [15, 20, 35, 40, 50]
        # numpy.percentile(xs, p): rank = (n-1)p/100, linear between neighbours.
        self.assertAlmostEqual(metrics.percentile(xs, 50), 35)
        self.assertAlmostEqual(metrics.percentile(xs, 0), 15)
        self.assertAlmostEqual(metrics.percentile(xs, 100), 50)
        self.assertAlmostEqual(metrics.percentile(xs, 40), 29)      # 20 + 0.6*15
        self.assertAlmostEqual(metrics.percentile(xs, 99), 49.6)    # 40 + 0.96*10
        self.assertAlmostEqual(metrics.percentile([3, 1, 2], 50), 2)  # unsorted input

    def test_empty_and_single(self):
        self.assertEqual(metrics.percentile([], 99), 0.0)
        self.assertEqual(metrics.percentile([7], 99), 7.0)

    def test_stdev_is_population(self):
        self.assertAlmostEqual(metrics.stdev([2, 4, 4, 4, 5, 5, 7, 9]), 2.0)


class RequestRecordTest(unittest.TestCase):
    def test_ttft_itl_latency(self):
        r = record(100.0, [100.5, 100.6, 100.8, 101.1])
        self.assertAlmostEqual(r.ttft, 0.5)
        self.assertEqual(len(r.itl), 3)
        for got, want in zip(r.itl, [0.1, 0.2, 0.3]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(r.latency, 1.1)
        # TPOT = (1.1 - 0.5) / (4 - 1) = 0.2
        self.assertAlmostEqual(metrics.tpot(r), 0.2)

    def test_multi_token_chunk_is_one_arrival(self):
        # 5 tokens in 3 chunks: 1, then 3 coalesced, then 1.
        r = record(0.0, [0.2, 0.5, 0.6], tokens=[1, 3, 1])
        self.assertEqual(r.output_tokens, 5)
        self.assertEqual(len(r.itl), 2)          # one gap per chunk
        self.assertAlmostEqual(r.itl[0], 0.3)
        # TPOT counts tokens: (0.6 - 0.2) / (5 - 1) = 0.1
        self.assertAlmostEqual(metrics.tpot(r), 0.1)

    def test_tpot_undefined_for_one_token(self):
        self.assertIsNone(metrics.tpot(record(0.0, [0.3])))


class SummaryTest(unittest.TestCase):
    def setUp(self):
        # A: ttft 0.1, 3 tokens, e2e 0.5 -> TPOT 0.2, ITL [0.2, 0.2]
        # B: ttft 0.3, 2 tokens, e2e 0.4 -> TPOT 0.1, ITL [0.1]
        # C: ttft 0.2, 1 token,  e2e 0.2 -> no TPOT (counts 0 for goodput)
        # D: failed: excluded from every figure
        self.results = [
            record(0.0, [0.1, 0.3, 0.5], prompt=10),
            record(1.0, [1.3, 1.4], prompt=20),
            record(2.0, [2.2], prompt=30),
            RequestResult(ok=False, error="boom", prompt_tokens=99, output_tokens=99),
        ]
        self.s = metrics.summarize(self.results, duration_s=2.0,
                                   slo_ttft_ms=250, slo_tpot_ms=150)

    def test_counts_and_throughput(self):
        s = self.s
        self.assertEqual(s["completed"], 3)
        self.assertEqual(s["failed"], 1)
        self.assertEqual(s["total_input_tokens"], 60)
        self.assertEqual(s["total_output_tokens"], 6)
        self.assertAlmostEqual(s["request_throughput"], 1.5)
        self.assertAlmostEqual(s["output_throughput"], 3.0)
        self.assertAlmostEqual(s["total_token_throughput"], 33.0)

    def test_latency_figures(self):
        s = self.s
        self.assertAlmostEqual(s["mean_ttft_ms"], 200.0)
        self.assertAlmostEqual(s["median_ttft_ms"], 200.0)
        self.assertAlmostEqual(s["p99_ttft_ms"], 298.0)   # 200 + 0.98*100
        self.assertAlmostEqual(s["mean_tpot_ms"], 150.0)  # requests A, B only
        self.assertAlmostEqual(s["median_tpot_ms"], 150.0)
        self.assertEqual(s["num_itl_gaps"], 3)            # pooled: 0.2, 0.2, 0.1
        self.assertAlmostEqual(s["mean_itl_ms"], 500 / 3)
        self.assertAlmostEqual(s["median_itl_ms"], 200.0)
        self.assertAlmostEqual(s["p99_itl_ms"], 200.0)
        self.assertAlmostEqual(s["mean_e2el_ms"], 1100 / 3)
        self.assertAlmostEqual(s["p50_e2el_ms"], 400.0)

    def test_goodput(self):
        # TTFT <= 250 ms: A, C. TPOT <= 150 ms: B, C (0). Both: C only.
        self.assertEqual(self.s["good_requests"], 1)
        self.assertAlmostEqual(self.s["request_goodput"], 0.5)
        none = metrics.summarize(self.results, 2.0)
        self.assertIsNone(none["request_goodput"])
        e2e = metrics.summarize(self.results, 2.0, slo_e2el_ms=450)
        self.assertEqual(e2e["good_requests"], 2)          # B and C

    def test_empty_run(self):
        s = metrics.summarize([], 1.0)
        self.assertEqual(s["completed"], 0)
        self.assertEqual(s["p99_itl_ms"], 0.0)
        self.assertIn("Successful requests", metrics.format_table("t", s))


class WindowTest(unittest.TestCase):
    def test_gaps_in_window(self):
        a = record(0.0, [1.0, 2.0, 3.0, 7.0, 8.0])
        b = record(0.0, [1.5, 2.5, 6.5])
        # Entirely inside [1, 3]: a 1->2, 2->3; b 1.5->2.5.
        self.assertEqual(sorted(metrics.gaps_in_window([a, b], 1.0, 3.0, overlap=False)),
                         [1.0, 1.0, 1.0])
        # Overlapping (4, 5): a 3->7 (4 s), b 2.5->6.5 (4 s).
        self.assertEqual(metrics.gaps_in_window([a, b], 4.0, 5.0, overlap=True), [4.0, 4.0])


class OpenAIClientTest(unittest.TestCase):
    """The HTTP/1.1 SSE client against a fake llama-server on loopback: one
    event per token (finish_reason null), a closing event with usage, events
    split across and packed into HTTP chunks."""

    async def _serve(self, reader, writer):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += await reader.read(1)
        length = int([l for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length")][0].split(b":")[1])
        self.body = json.loads(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")

        def chunk(data):
            writer.write(b"%x\r\n" % len(data) + data + b"\r\n")

        def event(obj):
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        n = self.body["max_tokens"]
        events = [event({"choices": [{"text": f"t{i}", "finish_reason": None}]})
                  for i in range(n)]
        chunk(events[0][:7])            # an event split across two chunks
        await writer.drain()
        await asyncio.sleep(0.05)
        chunk(events[0][7:])
        for e in events[1:]:
            await writer.drain()
            await asyncio.sleep(0.01)
            chunk(e)
        chunk(event({"choices": [{"text": "", "finish_reason": "length"}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": n}})
              + b"data: [DONE]\n\n")   # two events in one chunk
        chunk(b"")
        await writer.drain()
        writer.close()

    def test_stream(self):
        async def go():
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            backend = OpenAIBackend(f"http://127.0.0.1:{port}")
            r = await backend.generate(Request(prompt_ids=[5, 6, 7], output_len=4),
                                       RequestResult())
            server.close()
            return r
        r = asyncio.run(go())
        self.assertTrue(r.ok, r.error)
        self.assertEqual(self.body["prompt"], [5, 6, 7])
        self.assertTrue(self.body["stream"] and self.body["ignore_eos"])
        self.assertEqual(r.output_tokens, 4)
        self.assertEqual(r.prompt_tokens, 3)
        self.assertEqual(r.chunk_tokens, [1, 1, 1, 1])
        self.assertEqual(len(r.itl), 3)
        self.assertGreaterEqual(r.ttft, 0.05)


if __name__ == "__main__":
    if os.environ.get("XML_OUTPUT_FILE"):
        import harness  # JUnit XML for `make test`'s case count
        harness.main()
    else:
        unittest.main(verbosity=2)
