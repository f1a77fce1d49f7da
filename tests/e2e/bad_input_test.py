"""A corpus of bad input through the real braidd: every case gets the right
status within 100 ms while a steady stream of good requests keeps
succeeding. The corpus covers authentication, the transport (oversized and
malformed messages, unknown methods) and every validated field.
"""
import math
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

TOKEN = "corpus-token-3c9d1e"
CONTEXT = 512
LIMIT_S = 0.100
S = grpc.StatusCode


def corpus():
    """(name, method, request or raw bytes, metadata token, expected code)."""
    ok = pb.Prompt(text=b"Hi")
    gen = lambda **kw: pb.GenerateRequest(**kw)  # noqa: E731
    samp = lambda **kw: gen(prompt=ok, sampling=pb.SamplingParams(**kw))  # noqa: E731
    chat = lambda *m: pb.Prompt(chat=pb.ChatMessages(messages=[  # noqa: E731
        pb.ChatMessage(role=r, content=c) for r, c in m]))
    cases = [
        ("no token", "Generate", samp(max_tokens=4), None, S.UNAUTHENTICATED),
        ("wrong token", "Generate", samp(max_tokens=4), "nope",
         S.UNAUTHENTICATED),
        ("no token on Tokenize", "Tokenize",
         pb.TokenizeRequest(prompt=ok), None, S.UNAUTHENTICATED),
        ("no prompt", "Generate", gen(), TOKEN, S.INVALID_ARGUMENT),
        ("empty text", "Generate", gen(prompt=pb.Prompt(text=b"")), TOKEN,
         S.INVALID_ARGUMENT),
        ("invalid UTF-8", "Generate", gen(prompt=pb.Prompt(text=b"a\xff\xfe")),
         TOKEN, S.INVALID_ARGUMENT),
        ("truncated UTF-8", "Generate", gen(prompt=pb.Prompt(text=b"\xe2\x82")),
         TOKEN, S.INVALID_ARGUMENT),
        ("overlong UTF-8", "Generate", gen(prompt=pb.Prompt(text=b"\xc0\xaf")),
         TOKEN, S.INVALID_ARGUMENT),
        ("UTF-8 surrogate", "Generate",
         gen(prompt=pb.Prompt(text=b"\xed\xa0\x80")), TOKEN,
         S.INVALID_ARGUMENT),
        ("invalid UTF-8 in chat", "Generate",
         gen(prompt=chat(("user", b"\xc3\x28"))), TOKEN, S.INVALID_ARGUMENT),
        ("unknown chat role", "Generate", gen(prompt=chat(("wizard", b"hi"))),
         TOKEN, S.INVALID_ARGUMENT),
        ("empty chat", "Generate", gen(prompt=chat()), TOKEN,
         S.INVALID_ARGUMENT),
        ("negative token id", "Generate",
         gen(prompt=pb.Prompt(tokens=pb.TokenIds(ids=[1, -3]))), TOKEN,
         S.INVALID_ARGUMENT),
        ("token id past the vocabulary", "Generate",
         gen(prompt=pb.Prompt(tokens=pb.TokenIds(ids=[49152]))), TOKEN,
         S.INVALID_ARGUMENT),
        ("prompt longer than the context", "Generate",
         gen(prompt=pb.Prompt(tokens=pb.TokenIds(ids=[28] * (CONTEXT + 1)))),
         TOKEN, S.INVALID_ARGUMENT),
        ("max_tokens 0", "Generate", samp(max_tokens=0), TOKEN,
         S.INVALID_ARGUMENT),
        ("max_tokens 2^31", "Generate", samp(max_tokens=2**31), TOKEN,
         S.INVALID_ARGUMENT),
        ("temperature NaN", "Generate", samp(temperature=math.nan), TOKEN,
         S.INVALID_ARGUMENT),
        ("temperature inf", "Generate", samp(temperature=math.inf), TOKEN,
         S.INVALID_ARGUMENT),
        ("temperature negative", "Generate", samp(temperature=-1), TOKEN,
         S.INVALID_ARGUMENT),
        ("top_k negative", "Generate", samp(top_k=-1), TOKEN,
         S.INVALID_ARGUMENT),
        ("top_p 1.5", "Generate", samp(top_p=1.5), TOKEN, S.INVALID_ARGUMENT),
        ("min_p -0.1", "Generate", samp(min_p=-0.1), TOKEN,
         S.INVALID_ARGUMENT),
        ("top_logprobs without logprobs", "Generate", samp(top_logprobs=3),
         TOKEN, S.INVALID_ARGUMENT),
        ("unknown stop token", "Generate", samp(stop_token_ids=[10**6]), TOKEN,
         S.INVALID_ARGUMENT),
        ("request_id too long", "Generate",
         gen(prompt=ok, request_id="x" * 200), TOKEN, S.INVALID_ARGUMENT),
        ("tenant too long", "Generate", gen(prompt=ok, tenant="t" * 100),
         TOKEN, S.INVALID_ARGUMENT),
        ("priority 1000", "Generate", gen(prompt=ok, priority=1000), TOKEN,
         S.INVALID_ARGUMENT),
        ("Tokenize invalid UTF-8", "Tokenize",
         pb.TokenizeRequest(prompt=pb.Prompt(text=b"\xff")), TOKEN,
         S.INVALID_ARGUMENT),
        ("Detokenize id out of range", "Detokenize",
         pb.DetokenizeRequest(token_ids=[5, 10**6]), TOKEN,
         S.INVALID_ARGUMENT),
        ("oversized message", "Tokenize",
         pb.TokenizeRequest(prompt=pb.Prompt(text=b"a" * 100_000)), TOKEN,
         S.RESOURCE_EXHAUSTED),
        # gRPC 1.51's callback API answers a request that does not parse
        # with UNIMPLEMENTED (empty message) before braid sees it
        # (grpcpp/impl/codegen/server_callback_handlers.h); pinned here so
        # a change is noticed.
        ("malformed protobuf", "Tokenize", b"\x0a\xff\xff\xff\xff\x0f", TOKEN,
         S.UNIMPLEMENTED),
        ("unknown method", "NoSuchMethod", b"", TOKEN, S.UNIMPLEMENTED),
    ]
    return cases


class BadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tokens = os.path.join(tempfile.mkdtemp(), "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + "\n")
        cls.daemon = harness.Daemon(
            f"--auth_token_file={tokens}", "--max_receive_message_bytes=65536",
            f"--context_length={CONTEXT}", f"--kv_budget_tokens={4 * CONTEXT}",
            "--threads=1")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop_checked()

    def good_traffic(self, stop, results):
        """Generate requests back to back until `stop` is set."""
        with grpc.insecure_channel(self.daemon.addr) as ch:
            stub = pb_grpc.BraidStub(ch)
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    rs = list(stub.Generate(pb.GenerateRequest(
                        prompt=pb.Prompt(text=f"Fact {i}:".encode()),
                        sampling=pb.SamplingParams(max_tokens=8,
                                                   ignore_eos=True)),
                        timeout=60, metadata=[("authorization",
                                               f"Bearer {TOKEN}")]))
                    results.append(rs[-1].final.usage.output_tokens == 8)
                except grpc.RpcError as e:
                    results.append(e)

    def run_case(self, ch, method, request, token):
        md = [("authorization", f"Bearer {token}")] if token else None
        path = f"/braid.v1.Braid/{method}"
        raw = isinstance(request, bytes)
        ser = None if raw else type(request).SerializeToString
        if method == "Generate":
            rpc = ch.unary_stream(path, request_serializer=ser)
            start = time.perf_counter()
            try:
                for _ in rpc(request, timeout=10, metadata=md):
                    pass
                code = S.OK
            except grpc.RpcError as e:
                code, details = e.code(), e.details()
        else:
            rpc = ch.unary_unary(path, request_serializer=ser)
            start = time.perf_counter()
            try:
                rpc(request, timeout=10, metadata=md)
                code = S.OK
            except grpc.RpcError as e:
                code, details = e.code(), e.details()
        return code, time.perf_counter() - start

    def test_corpus(self):
        stop, results = threading.Event(), []
        traffic = threading.Thread(target=self.good_traffic,
                                   args=(stop, results))
        traffic.start()
        try:
            harness.wait_for(lambda: len(results) >= 1, 60,
                             "the first good request")
            with grpc.insecure_channel(self.daemon.addr) as ch:
                # Connect first so the first case does not pay for it.
                grpc.channel_ready_future(ch).result(timeout=10)
                slowest = 0.0
                for rounds in range(2):
                    for name, method, request, token, want in corpus():
                        with self.subTest(name, round=rounds):
                            code, secs = self.run_case(ch, method, request,
                                                       token)
                            slowest = max(slowest, secs)
                            self.assertEqual(code, want)
                            self.assertLess(secs, LIMIT_S,
                                            f"{name}: {secs * 1000:.1f} ms")
                print(f"slowest bad-input answer: {slowest * 1000:.1f} ms",
                      file=sys.stderr)
            good_before = len(results)
            harness.wait_for(lambda: len(results) >= good_before + 2, 60,
                             "good requests after the corpus")
        finally:
            stop.set()
            traffic.join(120)
        self.assertTrue(all(r is True for r in results), results)
        self.assertGreaterEqual(len(results), 3)
        self.assertTrue(self.daemon.alive())


if __name__ == "__main__":
    harness.main()
