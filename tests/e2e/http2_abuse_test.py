"""HTTP/2 abuse against a real braidd with a raw HTTP/2 client (the PyPI
`h2` library over plain sockets): rapid reset (CVE-2023-44487: HEADERS then
RST_STREAM, thousands of times), PING and SETTINGS floods, an oversized
header block, thousands of headers, a thousand idle connections and
hundreds of idle streams. Throughout, a well-behaved grpcio client keeps
calling Generate: every call succeeds, its median latency stays within 2x
(+50 ms) of its median beside the same attack aimed at a sink, the daemon
stays alive, and its resident memory stays under the bound
docs/OPERATIONS.md states (256 MiB above what it used before the attacks).

The baseline: the attacker runs on the same two cores as braidd and the
good client, and under load (`stress` on both cores) its own work slowed
the good calls 3.5x where braidd was not even involved. So each attack
first runs, just as fast, against a sink (a listener that reads and drops
every byte); the good client's median beside that is the baseline, and the
attack on braidd may add to it only what braidd's handling of the frames
costs. Each baseline is taken just before its attack, so a machine whose
speed drifts is compared with itself.
"""
import selectors
import os
import socket
import statistics
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.exceptions  # noqa: E402

pb, pb_grpc = harness.load_stubs()
MEMORY_BOUND = 256 << 20

HEADERS = [(":method", "POST"), (":scheme", "http"),
           (":path", "/braid.v1.Braid/Generate"), (":authority", "braid"),
           ("content-type", "application/grpc"), ("te", "trailers")]


class Raw:
    """One raw HTTP/2 connection (client side)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8",
            validate_outbound_headers=False))
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        try:
            self.sock.sendall(self.conn.data_to_send())
            return True
        except OSError:  # the server closed it (GOAWAY): an accepted answer
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class GoodClient(threading.Thread):
    """Generate calls in a loop; latency of each."""

    def __init__(self, addr):
        super().__init__(daemon=True)
        self.addr, self.stop = addr, threading.Event()
        self.latencies, self.errors = [], []

    def run(self):
        with grpc.insecure_channel(self.addr) as channel:
            stub = pb_grpc.BraidStub(channel)
            while not self.stop.is_set():
                t = time.perf_counter()
                try:
                    n = sum(len(r.token_ids) for r in stub.Generate(
                        pb.GenerateRequest(
                            prompt=pb.Prompt(text=b"Say hi."),
                            sampling=pb.SamplingParams(max_tokens=4,
                                                       ignore_eos=True)),
                        timeout=60))
                    if n != 4:
                        self.errors.append(f"{n} tokens")
                except grpc.RpcError as e:
                    self.errors.append(e.code().name)
                self.latencies.append(time.perf_counter() - t)


def rapid_reset(port):
    c = Raw(port)
    for i in range(5000):
        sid = 2 * i + 1
        try:
            c.conn.send_headers(sid, HEADERS)
            c.conn.reset_stream(sid)
        except h2.exceptions.ProtocolError:
            break
        if i % 50 == 0 and not c.flush():
            break
    c.flush()
    c.close()


def ping_flood(port):
    c = Raw(port)
    for i in range(10000):
        c.conn.ping(i.to_bytes(8, "big"))
        if i % 100 == 0 and not c.flush():
            break
    c.close()


def settings_flood(port):
    c = Raw(port)
    for i in range(10000):
        try:
            c.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE:
                                    65535 + i % 7})
        except h2.exceptions.ProtocolError:
            break
        if i % 100 == 0 and not c.flush():
            break
    c.close()


def big_headers(port):
    for headers in ([("x-big", "a" * (1 << 20))],
                    [(f"x-h{i}", "v") for i in range(10000)]):
        c = Raw(port)
        try:
            c.conn.send_headers(1, HEADERS + headers)
        except h2.exceptions.ProtocolError:
            pass
        c.flush()
        time.sleep(0.5)
        c.close()


def idle(port, seconds=5):
    conns = [Raw(port) for _ in range(1000)]
    # Hundreds of idle streams: headers, no message.
    for c in conns[:10]:
        for sid in range(1, 200, 2):
            c.conn.send_headers(sid, HEADERS)
        c.flush()
    time.sleep(seconds)
    for c in conns:
        c.close()


class Sink(threading.Thread):
    """Accepts every connection on 127.0.0.1 and drops what it reads."""

    def __init__(self):
        super().__init__(daemon=True)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4096)
        self.port = self.listener.getsockname()[1]

    def run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.listener, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fileobj is self.listener:
                    conn, _ = self.listener.accept()
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ)
                    continue
                try:
                    data = key.fileobj.recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()


class Http2AbuseTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_daemon("--threads=1")

    def rss(self):
        return self.daemon.metric("process_resident_memory_bytes")

    def beside(self, attack, port):
        """The good client's latencies while `attack` runs against `port`
        (and until it has made five calls)."""
        good = GoodClient(self.daemon.addr)
        good.start()
        attack(port)
        harness.wait_for(lambda: len(good.latencies) >= 5, 120,
                         "good calls during and after the attack")
        good.stop.set()
        good.join()
        self.assertEqual(good.errors, [])
        return good.latencies

    def test_abuse_leaves_good_clients_served(self):
        rss0 = self.rss()
        sink = Sink()
        sink.start()
        for attack in (rapid_reset, ping_flood, settings_flood, big_headers,
                       idle):
            with self.subTest(attack=attack.__name__):
                baseline = statistics.median(self.beside(attack, sink.port))
                latencies = self.beside(attack, self.daemon.port)
                self.assertTrue(self.daemon.alive(), self.daemon.read_log())
                during = statistics.median(latencies)
                print(f"{attack.__name__}: good median {during * 1000:.0f} ms "
                      f"(the same attack on a sink: {baseline * 1000:.0f} ms), "
                      "resident "
                      f"{self.rss() / 2**20:.0f} MiB", flush=True)
                self.assertLessEqual(during, 2 * baseline + 0.05)
                self.assertLess(self.rss() - rss0, MEMORY_BOUND)
        self.assertEqual(self.daemon.health(), "SERVING")


if __name__ == "__main__":
    harness.main()
