"""A bad-input corpus over HTTP against the real braidd: malformed JSON,
wrong types, huge bodies, invalid UTF-8, unknown fields, negative and NaN
numbers, broken HTTP, and slowloris-style slow headers. Each gets its
status promptly (within 100 ms of sending it; a slow request within 100 ms
of the header deadline) while good requests, sent throughout from another
thread, keep succeeding.
"""
import json
import select
import socket
import threading
import time
import unittest

import harness

HEADER_TIMEOUT = 1  # --http_header_timeout_seconds
PROMPT_OK = {"prompt": "Hello", "max_tokens": 2}


def exchange(port, raw, timeout=10):
    """Sends `raw` on a fresh connection; (HTTP status, seconds from the
    last byte sent to the status line, body)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(raw)
        t0 = time.monotonic()
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        elapsed = time.monotonic() - t0
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        while True:  # every request says Connection: close
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return status, elapsed, body
    finally:
        sock.close()


def post(path, body, extra_headers=b""):
    if isinstance(body, str):
        body = body.encode()
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n" +
            extra_headers + b"Content-Length: " + str(len(body)).encode() +
            b"\r\n\r\n" + body)


# (name, raw request, expected status)
CORPUS = [
    ("malformed JSON", post("/v1/completions", '{"prompt": "x",'), 400),
    ("not an object", post("/v1/completions", '[1, 2]'), 400),
    ("empty body", post("/v1/completions", ''), 400),
    ("prompt a number", post("/v1/completions", '{"prompt": 5}'), 400),
    ("temperature a string",
     post("/v1/completions", '{"prompt":"x","temperature":"hot"}'), 400),
    ("messages an object",
     post("/v1/chat/completions", '{"messages":{"role":"user"}}'), 400),
    ("content a number",
     post("/v1/chat/completions",
          '{"messages":[{"role":"user","content":7}]}'), 400),
    ("invalid UTF-8", post("/v1/completions", b'{"prompt":"\xff\xfe"}'), 400),
    ("negative max_tokens",
     post("/v1/completions", '{"prompt":"x","max_tokens":-1}'), 400),
    ("negative temperature",
     post("/v1/completions", '{"prompt":"x","temperature":-0.5}'), 400),
    ("NaN", post("/v1/completions", '{"prompt":"x","temperature":NaN}'), 400),
    ("Infinity", post("/v1/completions", '{"prompt":"x","top_p":1e999}'), 400),
    ("huge n", post("/v1/completions", '{"prompt":"x","n":100000}'), 400),
    ("token id out of the vocabulary",
     post("/v1/completions", '{"prompt":[99999999],"max_tokens":1}'), 400),
    ("huge body", post("/v1/completions",
                       b'{"prompt":"' + b"a" * (5 << 20) + b'"}'), 413),
    ("unknown endpoint", post("/v1/embeddings", '{"input":"x"}'), 404),
    ("unknown fields are ignored",
     post("/v1/completions",
          '{"prompt":"x","max_tokens":1,"not_a_field":[1,{"a":null}]}'), 200),
    ("garbage request line", b"\x00\x01\x02 nonsense\r\n\r\n", 400),
    ("Content-Length not a number",
     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n"
     b"Connection: close\r\n\r\n{}", 400),
]


class HttpBadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = harness.Daemon(
            "--threads=2", f"--http_header_timeout_seconds={HEADER_TIMEOUT}",
            http=True)
        cls.port = cls.daemon.http_port
        cls.stop = threading.Event()
        cls.good = {"ok": 0, "failed": []}

        def good_requests():
            while not cls.stop.is_set():
                status, _, body = exchange(
                    cls.port, post("/v1/completions", json.dumps(PROMPT_OK)),
                    timeout=60)
                if status == 200 and json.loads(body)["usage"][
                        "completion_tokens"] == 2:
                    cls.good["ok"] += 1
                else:
                    cls.good["failed"].append((status, body[:200]))
        cls.good_thread = threading.Thread(target=good_requests, daemon=True)
        cls.good_thread.start()
        harness.wait_for(lambda: cls.good["ok"] > 0, 60,
                         "a first good request")

    @classmethod
    def tearDownClass(cls):
        cls.stop.set()
        cls.good_thread.join(timeout=60)
        cls.daemon.stop_checked()

    def test_corpus(self):
        slow = []
        for name, raw, want in CORPUS:
            with self.subTest(name):
                status, elapsed, body = exchange(self.port, raw)
                self.assertEqual(status, want, (name, body[:300]))
                if want >= 400:
                    self.assertIn(b'"error"', body, name)
                slow.append((elapsed, name))
        print("slowest answers:", sorted(slow)[-3:])
        for elapsed, name in slow:
            if name != "unknown fields are ignored":  # it generates a token
                self.assertLess(elapsed, 0.1, name)
        self.assertTrue(self.daemon.alive())

    def test_slow_headers_get_408_at_the_deadline(self):
        """Slowloris: a header byte every 200 ms keeps each read short of the
        socket timeout, but the request deadline ends it."""
        socks, opened = [], []
        for _ in range(8):  # several at once: the good requests go on
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            opened.append(time.monotonic())
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        t0 = time.monotonic()
        next_byte = t0 + 0.2
        answered = {}
        while len(answered) < len(socks):
            self.assertLess(time.monotonic() - t0, HEADER_TIMEOUT + 5,
                            "slow requests not cut")
            waiting = [s for i, s in enumerate(socks) if i not in answered]
            readable, _, _ = select.select(waiting, [], [], 0.01)
            for s in readable:
                try:
                    data = s.recv(65536)
                except OSError as e:
                    data = repr(e).encode()
                i = socks.index(s)  # seconds since it connected
                answered[i] = (time.monotonic() - opened[i], data)
            if time.monotonic() >= next_byte:
                next_byte += 0.2
                for s in waiting:
                    try:
                        s.send(b"X")
                    except OSError:
                        pass
        for s in socks:
            s.close()
        for i, (t, data) in answered.items():
            self.assertIn(b"408", data.split(b"\r\n")[0], data[:200])
            self.assertGreater(t, HEADER_TIMEOUT - 0.05)
            self.assertLess(t, HEADER_TIMEOUT + 0.1, t)
        print("408 after", sorted(round(t, 3) for t, _ in answered.values()))
        ok = self.good["ok"]
        harness.wait_for(lambda: self.good["ok"] > ok, 60,
                         "good requests go on after the slow ones")
        self.assertEqual(self.good["failed"], [])


if __name__ == "__main__":
    harness.main()
