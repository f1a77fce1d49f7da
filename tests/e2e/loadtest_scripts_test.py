"""deploy/loadtest/loadtest.py against a real braidd, so it cannot rot: a
two-rate sweep over gRPC writes its table, JSON and two readable PNG plots,
a sweep over the HTTP API works the same, and a short soak reports windows,
no errors and the server's resident memory (process_resident_memory_bytes).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


class LoadtestScriptsTest(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_daemon("--threads=2", http=True)
        cls.script = harness.runfile("deploy/loadtest/loadtest.py")

    def run_script(self, *args):
        r = subprocess.run([sys.executable, self.script, *args],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def test_sweep_writes_table_json_and_plots(self):
        for backend in ("braid", "openai"):
            with self.subTest(backend=backend):
                out = tempfile.mkdtemp(prefix="sweep_")
                text = self.run_script(
                    "sweep", "--backend", backend, "--addr", self.daemon.addr,
                    "--base-url", f"http://127.0.0.1:{self.daemon.http_port}",
                    "--rates", "1,3", "--duration-s", "3", "--prompt-len",
                    "16", "--output-len", "8", "--out", out)
                self.assertIn("| offered req/s | req/s | out tok/s |", text)
                with open(os.path.join(out, "sweep.json")) as f:
                    rows = json.load(f)["rows"]
                self.assertEqual([r["rate"] for r in rows], [1, 3])
                self.assertEqual([r["completed"] for r in rows], [3, 9])
                for r in rows:
                    self.assertEqual(r["failed"], 0)
                    self.assertGreater(r["output_throughput"], 0)
                for name in ("latency.png", "goodput.png"):
                    with open(os.path.join(out, name), "rb") as f:
                        data = f.read()
                    self.assertTrue(data.startswith(PNG), name)
                    self.assertGreater(len(data), 10000, name)

    def test_soak_reports_windows_errors_and_memory(self):
        # Seconds of soak on a daemon that has just started: its memory still
        # grows as the load's concurrency first peaks (gRPC threads and their
        # allocator arenas), so the growth bound is the hour-long soak's, not
        # this run's; the test checks what the script reports.
        text = self.run_script(
            "soak", "--addr", self.daemon.addr, "--rate", "2", "--hours",
            str(6 / 3600), "--window-s", "3", "--prompt-len", "16",
            "--output-len", "4", "--max-growth", "1", "--metrics-url",
            f"http://127.0.0.1:{self.daemon.metrics_port}/metrics")
        windows = [json.loads(l) for l in text.splitlines()
                   if l.startswith("{")]
        self.assertGreaterEqual(len(windows), 2)
        for w in windows:
            self.assertEqual(w["failed"], 0)
            self.assertGreater(w["rss_mib"], 10)
        self.assertIn("0 errors", text)
        self.assertRegex(text, r"resident memory grew -?[0-9.]+%")


if __name__ == "__main__":
    harness.main()
