"""`braid chat` driven through a real terminal (a pty) against the real
braidd: turns over one Session whose context stays in the daemon (the
second turn computes only its own tokens), Ctrl-C interrupting a reply
without ending the session, --stream-input landing a line mid-reply, and
global flags after the command.
"""
import ctypes
import json
import os
import pty
import select
import signal
import tempfile
import time
import unittest

import harness

# About 150 tokens: a first turn that a recomputing client would pay again.
SYSTEM = ("You are a careful assistant. " * 25).strip()


def stats(path):
    with open(path) as f:
        return json.load(f)


class Terminal:
    """braid CLI under a pty: `send` types, `expect` reads until a text."""

    def __init__(self, *argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], list(argv))
        self.out = b""

    def send(self, data):
        os.write(self.fd, data)

    def expect(self, text, timeout=120, start=None):
        """Reads until `text` appears after offset `start` (default: what was
        read so far); returns its offset."""
        start = len(self.out) if start is None else start
        deadline = time.time() + timeout
        while True:
            i = self.out.find(text, start)
            if i >= 0:
                return i
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"no {text!r} in {self.out[start:]!r}")
            r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if r:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:  # the child exited
                    raise AssertionError(
                        f"exited before {text!r}: {self.out[start:]!r}")

    def read_more(self, n, timeout=120):
        """Reads until `n` more bytes arrived."""
        want = len(self.out) + n
        deadline = time.time() + timeout
        while len(self.out) < want:
            if time.time() > deadline:
                raise AssertionError(f"output stalled: {self.out[-300:]!r}")
            r, _, _ = select.select([self.fd], [], [], 0.5)
            if r:
                self.out += os.read(self.fd, 65536)

    def wait(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:  # keep draining so the child never blocks on output
                r, _, _ = select.select([self.fd], [], [], 0.1)
                if r:
                    self.out += os.read(self.fd, 65536)
            except OSError:
                time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"braid chat did not exit: {self.out[-500:]!r}")


class ChatCliTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.stats_path = os.path.join(tempfile.mkdtemp(), "stats")
        # Steps of at least 15 ms: a line typed mid-reply must land before
        # the reply's last ~85 tokens are out (1.3 s of steps; at a fast
        # machine's 3 ms a step they took 0.25 s, and the line could arrive
        # after the reply as a turn of its own).
        cls.start_daemon("--threads=2", f"--stats_file={cls.stats_path}",
                         "--debug_min_step_ms=15")

    def chat(self, *flags):
        # Global flags after the command, in both spellings.
        return Terminal(harness.runfile("tools/braid"), "chat", "--addr",
                        self.daemon.addr, "--temperature=0", "--no-color",
                        *flags)

    def settle(self, sessions):
        """After a turn ended (the CLI shows its prompt) the engine has
        nothing to compute: waits until the stats file shows `sessions` open
        sessions and the same computed_tokens in three reads (it is
        rewritten every 100 ms); returns the stats."""
        last = []

        def quiet():
            s = stats(self.stats_path)
            if s["sessions"] != sessions or s["waiting"] != 0:
                last.clear()
                return None
            last.append(s["computed_tokens"])
            time.sleep(0.15)
            return s if len(last) >= 3 and len(set(last[-3:])) == 1 else None
        return harness.wait_for(quiet, 60, f"{sessions} open sessions, idle")

    def test_turns_keep_the_context(self):
        t = self.chat("--max-tokens", "24", "--system", SYSTEM)
        t.expect(b"> ")
        c0 = self.settle(0)["computed_tokens"]  # the first line opens it
        t.send(b"Hi! What is your job?\n")
        t.expect(b"> ")
        c1 = self.settle(1)["computed_tokens"]
        t.send(b"Say it again in three words.\n")
        t.expect(b"> ")
        c2 = self.settle(1)["computed_tokens"]
        first, second = c1 - c0, c2 - c1
        print(f"turn 1 computed {first} tokens, turn 2 {second}")
        self.assertGreater(first, 150)  # the system message and the turn
        # Turn 2: its own ~20 prompt tokens and <= 24 reply tokens, not the
        # history again.
        self.assertLess(second, 60)
        t.send(b"\x04")  # Ctrl-D ends the chat
        self.assertEqual(t.wait(), 0)
        harness.wait_engine_idle(self.stats_path)

    def test_ctrl_c_interrupts_the_reply_not_the_session(self):
        t = self.chat("--ignore-eos", "--max-tokens=3000")
        t.expect(b"> ")
        t.send(b"Tell me a long story.\n")
        start = len(t.out)
        t.read_more(60)
        t.send(b"\x03")
        t.expect(b"[interrupted]", start=start)
        t.expect(b"> ", start=start)
        self.settle(1)  # the session stays open
        t.send(b"Thanks.\n")
        start = len(t.out)
        t.read_more(30)
        t.send(b"\x03")
        t.expect(b"[interrupted]", start=start)
        t.expect(b"> ", start=start)
        t.send(b"\x03")  # at the prompt: ends the chat
        self.assertEqual(t.wait(), 0)
        harness.wait_engine_idle(self.stats_path)

    def test_ctrl_c_at_the_prompt_taken_by_any_thread(self):
        """The terminal's SIGINT goes to whichever thread of the CLI the
        kernel picks (the gRPC client has several): delivered to one that
        is not the one waiting for the next line, Ctrl-C at the prompt
        still ends the chat."""
        t = self.chat("--max-tokens", "8")
        t.expect(b"> ")
        t.send(b"Hi!\n")
        start = len(t.out)
        t.expect(b"> ", start=start)
        self.settle(1)
        tids = [int(x) for x in os.listdir(f"/proc/{t.pid}/task")]
        others = [x for x in tids if x != t.pid]
        self.assertTrue(others, "the CLI runs gRPC threads")
        libc = ctypes.CDLL(None, use_errno=True)
        sys_tgkill = 234  # x86-64
        self.assertEqual(
            libc.syscall(sys_tgkill, t.pid, others[0], signal.SIGINT), 0)
        self.assertEqual(t.wait(), 0)
        harness.wait_engine_idle(self.stats_path)

    def test_stream_input_lands_mid_reply(self):
        def context(s):  # computed, or taken from the prefix cache
            return s["computed_tokens"] + s["prefix_hit_tokens"]

        def run(interject):
            t = self.chat("--stream-input", "--ignore-eos", "--max-tokens=120")
            t.expect(b"> ")
            c0 = context(self.settle(0))
            t.send(b"Count from one to fifty.\n")
            start = len(t.out)
            if interject:
                harness.wait_for(lambda: stats(self.stats_path)[
                    "computed_tokens"] > c0 + 70, 60, "the reply started")
                t.send(b"Now count backwards in French please.\n")
            t.expect(b"\n> ", start=start)  # the reply ended
            c1 = context(self.settle(1))
            t.send(b"\x04")
            self.assertEqual(t.wait(), 0)
            harness.wait_engine_idle(self.stats_path)
            return c1 - c0
        plain, interjected = run(False), run(True)
        print(f"the turn's context: {plain} tokens, {interjected} with a "
              "line typed mid-reply")
        # The same 120-token reply plus the typed line's ~15 tokens.
        self.assertGreater(interjected, plain + 8)
        self.assertLess(interjected, plain + 40)


if __name__ == "__main__":
    harness.main()
