"""The OpenAI-compatible HTTP API through the real braidd, driven by the
official `openai` Python client (PyPI): completions and chat, streamed and
whole, n = 3 with seeds, stop strings, logprobs, include_usage; greedy
output equal to the gRPC Generate of the same prompt; every error status
(400, 401, 403, 404, 413, 429, 503); tools, assistant tool calls and tool
results through a chat template with tools (Qwen2.5's, by --chat_template)
reach the model as jinja2 renders them; a client that disconnects mid-stream
frees its slot; metrics count HTTP requests under frontend="http"; SIGTERM
drains an HTTP stream.
"""
import http.client
import json
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

import harness

pb, _ = harness.load_stubs()

PROMPT = "The three primary colors are"
CHAT = [{"role": "user", "content": "Name a large animal."}]


def openai_client(daemon, api_key="unused", **kw):
    import openai
    return openai.OpenAI(base_url=daemon.base_url, api_key=api_key,
                         max_retries=0, timeout=120, **kw)


def raw_post(daemon, path, body, headers=None):
    """(status, parsed JSON body) of a POST on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", daemon.http_port,
                                      timeout=60)
    try:
        conn.request("POST", path, body=body,
                     headers={"Content-Type": "application/json",
                              **(headers or {})})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()


def rpc_count(daemon, method, code, frontend="http"):
    return daemon.rpc_count(method, code, frontend)


class OpenAITest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        cls.start_daemon("--threads=2", "--context_length=1024",
                         f"--stats_file={cls.stats_path}",
                         "--max_waiting_tokens=400", http=True)
        cls.client = openai_client(cls.daemon)

    def grpc_generate(self, prompt, max_tokens, logprobs=False, top=0):
        req = pb.GenerateRequest(prompt=prompt, sampling=pb.SamplingParams(
            max_tokens=max_tokens, temperature=0, logprobs=logprobs,
            top_logprobs=top))
        responses = list(self.stub.Generate(req, timeout=120))
        text = "".join(r.text for r in responses)
        lps = [lp for r in responses for lp in r.logprobs]
        return text, lps, responses[-1].final

    def test_models_and_health(self):
        models = self.client.models.list()
        self.assertEqual(len(models.data), 1)
        self.assertEqual(models.data[0].id, "SmolLM2-135M-Instruct.Q4_1")
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.http_port)
        conn.request("GET", "/health")
        self.assertEqual(conn.getresponse().status, 200)
        conn.close()

    def test_greedy_completion_equals_grpc_generate(self):
        text, _, final = self.grpc_generate(pb.Prompt(text=PROMPT.encode()), 24)
        r = self.client.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                           prompt=PROMPT, max_tokens=24,
                                           temperature=0)
        self.assertEqual(r.choices[0].text, text)
        self.assertEqual(r.usage.completion_tokens, final.usage.output_tokens)
        self.assertEqual(r.usage.prompt_tokens, final.usage.prompt_tokens)
        self.assertEqual(r.usage.total_tokens,
                         r.usage.prompt_tokens + r.usage.completion_tokens)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.object, "text_completion")
        # Streamed: the same text, one event per token, usage at the end.
        stream = self.client.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt=PROMPT, max_tokens=24,
            temperature=0, stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        self.assertEqual("".join(c.choices[0].text for c in chunks
                                 if c.choices), text)
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 24)
        finishes = [c.choices[0].finish_reason for c in chunks
                    if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finishes, ["length"])

    def test_greedy_chat_equals_grpc_generate(self):
        chat = pb.ChatMessages(messages=[
            pb.ChatMessage(role=m["role"], content=m["content"].encode())
            for m in CHAT])
        text, _, final = self.grpc_generate(pb.Prompt(chat=chat), 20)
        r = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT, max_tokens=20,
            temperature=0)
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.choices[0].message.content, text)
        self.assertEqual(r.usage.prompt_tokens, final.usage.prompt_tokens)
        stream = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT,
            max_completion_tokens=20, temperature=0, stream=True,
            stream_options={"include_usage": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual("".join(c.choices[0].delta.content or ""
                                 for c in chunks if c.choices), text)
        self.assertEqual(chunks[-1].usage.completion_tokens,
                         final.usage.output_tokens)

    def test_n_choices_with_seeds(self):
        kw = dict(model="SmolLM2-135M-Instruct.Q4_1", prompt="Once upon a time",
                  max_tokens=12, temperature=1.0, seed=7, n=3)
        extra = {"ignore_eos": True, "top_k": 40}
        a = self.client.completions.create(extra_body=extra, **kw)
        b = self.client.completions.create(extra_body=extra, **kw)
        self.assertEqual([c.index for c in a.choices], [0, 1, 2])
        texts = [c.text for c in a.choices]
        self.assertEqual(texts, [c.text for c in b.choices])  # same seed
        self.assertGreater(len(set(texts)), 1, texts)  # seed + i per choice
        self.assertEqual(a.usage.completion_tokens, 36)
        # Streamed: every choice's events, each ending with its finish.
        stream = self.client.completions.create(extra_body=extra, stream=True,
                                                **kw)
        got = {0: "", 1: "", 2: ""}
        finished = set()
        for c in stream:
            for ch in c.choices:
                got[ch.index] += ch.text
                if ch.finish_reason:
                    finished.add(ch.index)
        self.assertEqual(finished, {0, 1, 2})
        self.assertEqual([got[i] for i in range(3)], texts)
        # A one-token prompt has nothing to share: n requests.
        one = self.client.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt=[504], max_tokens=4,
            n=2, seed=1, temperature=1.0)
        self.assertEqual(len(one.choices), 2)
        self.assertEqual(one.usage.completion_tokens, 8)
        # Chat with n.
        r = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT, max_tokens=8,
            temperature=0.9, seed=3, n=3)
        self.assertEqual(len(r.choices), 3)

    def test_stop_strings(self):
        full, _, _ = self.grpc_generate(pb.Prompt(text=PROMPT.encode()), 24)
        stop = full.strip().split()[2]
        r = self.client.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt=PROMPT, max_tokens=24,
            temperature=0, stop=[stop, "zzzz"])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].text, full[:full.index(stop)])

    def test_logprobs(self):
        _, lps, _ = self.grpc_generate(pb.Prompt(text=PROMPT.encode()), 6,
                                       logprobs=True, top=3)
        r = self.client.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt=PROMPT, max_tokens=6,
            temperature=0, logprobs=3)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 6)
        self.assertEqual(len(lp.top_logprobs), 6)
        for want, got, top in zip(lps, lp.token_logprobs, lp.top_logprobs):
            self.assertAlmostEqual(want.logprob, got, places=5)
            self.assertEqual(len(top), 3)
        self.assertEqual(lp.text_offset[0], 0)
        self.assertEqual(r.choices[0].text, "".join(lp.tokens))
        chat = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT, max_tokens=5,
            temperature=0, logprobs=True, top_logprobs=2)
        content = chat.choices[0].logprobs.content
        self.assertEqual(len(content), 5)
        for item in content:
            self.assertEqual(len(item.top_logprobs), 2)
            self.assertLessEqual(item.logprob, 0)
            self.assertEqual(bytes(item.bytes).decode("utf-8", "replace"),
                             item.token)

    def test_error_statuses(self):
        import openai
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                           prompt="x", top_p=3)
        self.assertEqual(e.exception.status_code, 400)
        self.assertEqual(e.exception.body["param"], "top_p")
        # braid's TPOT and TTFT objectives: in range served, out of range
        # named.
        ok = self.client.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt="x", max_tokens=2,
            extra_body={"tpot_objective_ms": 25, "ttft_objective_ms": 2000,
                        "ignore_eos": True})
        self.assertEqual(ok.usage.completion_tokens, 2)
        for field, value in (("tpot_objective_ms", 70000),
                             ("ttft_objective_ms", 3600001)):
            with self.assertRaises(openai.BadRequestError) as e:
                self.client.completions.create(
                    model="SmolLM2-135M-Instruct.Q4_1", prompt="x",
                    extra_body={field: value})
            self.assertEqual(e.exception.body["param"], field)
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="gpt-4", prompt="x")
        # 429: a prompt over the waiting-token bound (--max_waiting_tokens).
        with self.assertRaises(openai.RateLimitError):
            self.client.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                           prompt=[1] * 500, max_tokens=1)
        # 413: a body over --http_max_body_bytes.
        status, body = raw_post(self.daemon, "/v1/completions",
                                b'{"prompt":"' + b"a" * (5 << 20) + b'"}')
        self.assertEqual(status, 413)
        self.assertIn("error", body)
        # 400 with the field for a context overflow.
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                           prompt="x", max_tokens=5000)
        self.assertIn("max_tokens", str(e.exception))
        self.assertGreater(rpc_count(self.daemon, "completions",
                                     "INVALID_ARGUMENT"), 0)
        self.assertGreater(rpc_count(self.daemon, "completions",
                                     "RESOURCE_EXHAUSTED"), 0)
        # Tools need a chat template with tool calls (SmolLM2's is chatml).
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT,
                tools=[{"type": "function", "function": {"name": "f"}}])
        self.assertEqual(e.exception.body["param"], "tools")
        self.assertIn("chatml", e.exception.body["message"])

    def test_disconnect_mid_stream_frees_the_slot(self):
        harness.wait_engine_idle(self.stats_path, timeout=60)
        sock = socket.create_connection(("127.0.0.1", self.daemon.http_port))
        body = json.dumps({"prompt": PROMPT, "max_tokens": 900,
                           "ignore_eos": True, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += sock.recv(65536)
        self.assertIn(b"200 OK", got.split(b"\r\n")[0])

        def running():
            with open(self.stats_path) as f:
                return json.load(f)["requests"] == 1
        harness.wait_for(running, 30, "the stream's request in the engine")
        sock.close()
        stats = harness.wait_engine_idle(self.stats_path, timeout=30)
        self.assertEqual(stats["kv_blocks_free"], stats["kv_blocks_total"])
        harness.wait_for(lambda: rpc_count(self.daemon, "completions",
                                           "CANCELLED") >= 1,
                         10, "the disconnect counted as CANCELLED")

    def test_metrics_count_http_requests(self):
        before = rpc_count(self.daemon, "chat_completions", "OK")
        self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=CHAT, max_tokens=2)
        harness.wait_for(lambda: rpc_count(self.daemon, "chat_completions",
                                           "OK") == before + 1,
                         10, "the chat request counted")
        self.assertGreater(rpc_count(self.daemon, "models", "OK"), -1)
        self.assertEqual(rpc_count(self.daemon, "Generate", "UNAVAILABLE",
                                   frontend="grpc"), 0)


def golden_tool_cases():
    """(tools, messages, rendering) of chat_tools_golden.tsv's lines with
    tools and add_generation_prompt: what jinja2 renders from Qwen2.5's
    template, the tools and calls as the API carries them."""
    path = harness.runfile(
        "model/tokenizer/testdata/chat/chat_tools_golden.tsv")
    hx = lambda h: bytes.fromhex(h).decode()
    cases = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            f_ = line.rstrip("\n").split("\t")
            if f_[4] != "1" or f_[6] == "-" or f_[7] == "ERROR":
                continue
            tools = [json.loads(hx(t)) for t in f_[6].split(",")]
            messages = []
            for m in f_[5].split(","):
                role, content, calls = m.split(":")
                msg = {"role": hx(role), "content": hx(content) or None}
                if calls:
                    msg["tool_calls"] = [
                        {"id": f"call_{i}", "type": "function",
                         "function": {"name": hx(c.split(";")[0]),
                                      "arguments": hx(c.split(";")[1])}}
                        for i, c in enumerate(calls.split("+"))]
                if msg["role"] == "tool":
                    msg["tool_call_id"] = "call_0"
                messages.append(msg)
            cases.append((tools, messages, hx(f_[7])))
    return cases


class OpenAIToolsTest(harness.DaemonTestCase):
    """Function calling through a chat template with tools: the model's
    file keeps SmolLM2's weights and tokens, braidd renders with Qwen2.5's
    template (--chat_template, a Jinja file)."""

    @classmethod
    def setUpClass(cls):
        template = harness.runfile(
            "model/tokenizer/testdata/chat/qwen2_5.jinja")
        cls.start_daemon("--threads=2", "--context_length=1024",
                         f"--chat_template={template}", http=True)
        cls.client = openai_client(cls.daemon)

    def grpc_greedy(self, text, max_tokens):
        req = pb.GenerateRequest(
            prompt=pb.Prompt(text=text.encode(), add_special_tokens=False),
            sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0))
        responses = list(self.stub.Generate(req, timeout=120))
        return "".join(r.text for r in responses), responses[-1].final

    def test_tools_and_calls_render_as_jinja_does(self):
        # Tools, assistant turns that call them and tool results reach the
        # model exactly as jinja2 renders Qwen2.5's template: the same
        # prompt tokens and the same greedy output as that text through
        # gRPC.
        cases = golden_tool_cases()
        self.assertGreaterEqual(len(cases), 6)
        calls_seen = 0
        for tools, messages, rendering in cases:
            calls_seen += sum(len(m.get("tool_calls", [])) for m in messages)
            text, final = self.grpc_greedy(rendering, 8)
            r = self.client.chat.completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", messages=messages,
                tools=tools, max_tokens=8, temperature=0)
            self.assertEqual(r.usage.prompt_tokens, final.usage.prompt_tokens,
                             json.dumps(messages))
            if not r.choices[0].message.tool_calls:
                self.assertEqual(r.choices[0].message.content, text.strip())
        self.assertGreater(calls_seen, 4)

    def test_tool_choice(self):
        import openai
        tools, messages, rendering = golden_tool_cases()[0]
        # "none": the tools stay out of the prompt.
        plain = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=messages,
            max_tokens=1, temperature=0)
        none = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=messages,
            tools=tools, tool_choice="none", max_tokens=1, temperature=0)
        self.assertEqual(none.usage.prompt_tokens, plain.usage.prompt_tokens)
        with_tools = self.client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=messages,
            tools=tools, max_tokens=1, temperature=0)
        self.assertGreater(with_tools.usage.prompt_tokens,
                           plain.usage.prompt_tokens + 50)
        for choice in ("required",
                       {"type": "function", "function": {"name": "now"}}):
            with self.assertRaises(openai.BadRequestError) as e:
                self.client.chat.completions.create(
                    model="SmolLM2-135M-Instruct.Q4_1", messages=messages,
                    tools=tools, tool_choice=choice, max_tokens=1)
            self.assertEqual(e.exception.body["param"], "tool_choice")
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", messages=[
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "c", "type": "function", "function": {
                            "name": "f", "arguments": "{not json"}}]}],
                max_tokens=1)
        self.assertIn("arguments", e.exception.body["param"])
        # Refusals touch nothing else: the next request is served.
        self.assertEqual(len(self.client.models.list().data), 1)


class OpenAIReasoningTest(unittest.TestCase):
    """Reasoning as `reasoning_content`, in chat deltas and messages, as vLLM
    and llama.cpp send it: braidd runs SmolLM2 with two one-token specials as
    thinking markers (as reasoning_test does), the user turn opens thinking,
    and reasoning_budget forces the end marker after 4 tokens."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = harness.Daemon("--threads=2", "--context_length=512",
                                    "--think_start=<jupyter_text>",
                                    "--think_end=<jupyter_code>", http=True)
        cls.client = openai_client(cls.daemon)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop_checked()

    def test_reasoning_content(self):
        kw = dict(model="SmolLM2-135M-Instruct.Q4_1", max_tokens=12,
                  temperature=0,
                  messages=[{"role": "user", "content":
                             "What is the capital of France?<jupyter_text>"}],
                  extra_body={"reasoning_budget": 4, "ignore_eos": True})
        r = self.client.chat.completions.create(**kw)
        message = r.choices[0].message.model_dump()
        self.assertTrue(message.get("reasoning_content"), message)
        self.assertTrue(message["content"], message)
        self.assertEqual(
            r.usage.completion_tokens_details.reasoning_tokens, 5)  # + marker
        self.assertEqual(r.usage.completion_tokens, 12)
        reasoning, content = "", ""
        for c in self.client.chat.completions.create(stream=True, **kw):
            if not c.choices:
                continue
            delta = c.choices[0].delta.model_dump()
            reasoning += delta.get("reasoning_content") or ""
            content += delta.get("content") or ""
        self.assertEqual(reasoning, message["reasoning_content"])
        self.assertEqual(content, message["content"])


class OpenAIAuthTest(unittest.TestCase):
    """The gRPC token file guards HTTP too: no or an unknown token 401, a
    token without the generate scope 403."""

    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp()
        cls.tokens = os.path.join(d, "tokens")
        with open(cls.tokens, "w") as f:
            f.write("good-token\ninfo-token info\n")
        cls.daemon = harness.Daemon(f"--auth_token_file={cls.tokens}",
                                    "--threads=2", http=True)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop_checked()

    def test_tokens(self):
        import openai
        with self.assertRaises(openai.AuthenticationError):
            openai_client(self.daemon, api_key="wrong").completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", prompt="x", max_tokens=1)
        status, body = raw_post(self.daemon, "/v1/completions",
                                b'{"prompt":"x"}')
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["type"], "authentication_error")
        with self.assertRaises(openai.PermissionDeniedError):
            openai_client(self.daemon, api_key="info-token").completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", prompt="x", max_tokens=1)
        models = openai_client(self.daemon, api_key="info-token").models.list()
        self.assertEqual(len(models.data), 1)
        r = openai_client(self.daemon, api_key="good-token").completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", prompt="x", max_tokens=2)
        self.assertEqual(r.usage.completion_tokens, 2)


class OpenAILifecycleTest(unittest.TestCase):
    """503 while the model loads; SIGTERM drains an HTTP stream: /health
    503, new requests 503, the open stream ends (an error event past the
    grace period) and braidd exits 0."""

    def test_loading_then_drain(self):
        import openai
        daemon = harness.Daemon("--debug_load_delay_ms=4000", "--threads=2",
                                "--drain_grace_seconds=1",
                                wait_serving=False, http=True)
        try:
            status, body = raw_post(daemon, "/v1/completions",
                                    b'{"prompt":"x"}')
            self.assertEqual(status, 503)
            self.assertIn("loading", body["error"]["message"])
            conn = http.client.HTTPConnection("127.0.0.1", daemon.http_port)
            conn.request("GET", "/health")
            self.assertEqual(conn.getresponse().status, 503)
            conn.close()
            daemon.wait_serving()
            client = openai_client(daemon)
            stream = client.completions.create(
                model="SmolLM2-135M-Instruct.Q4_1", prompt=PROMPT,
                max_tokens=3000, stream=True, extra_body={"ignore_eos": True})
            it = iter(stream)
            next(it)
            daemon.proc.send_signal(signal.SIGTERM)

            def health_503():
                c = http.client.HTTPConnection("127.0.0.1", daemon.http_port,
                                               timeout=5)
                try:
                    c.request("GET", "/health")
                    return c.getresponse().status == 503
                except OSError:
                    return False
                finally:
                    c.close()
            harness.wait_for(health_503, 10, "/health 503 while draining")
            with self.assertRaises(openai.InternalServerError):
                client.completions.create(model="SmolLM2-135M-Instruct.Q4_1",
                                          prompt="x", max_tokens=1)
            # The stream ends with an error event once the grace period ends.
            with self.assertRaises(openai.APIError) as e:
                for _ in it:
                    pass
            self.assertIn("drain", str(e.exception))
            self.assertEqual(daemon.proc.wait(timeout=30), 0)
        finally:
            daemon.stop()


if __name__ == "__main__":
    harness.main()
