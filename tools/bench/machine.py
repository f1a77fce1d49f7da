"""What the benchmarks say of the machine they ran on."""
import os
import platform
import time


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_times():
    """(total, busy) CPU seconds of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    hz = os.sysconf("SC_CLK_TCK")
    return sum(v) / hz, (sum(v) - idle) / hz


def cpu_busy(sample_s=2.0):
    """Fraction of all CPUs busy over `sample_s` seconds (0 when /proc/stat
    cannot be read)."""
    try:
        t0, b0 = cpu_times()
        time.sleep(sample_s)
        t1, b1 = cpu_times()
    except OSError:
        return 0.0
    return (b1 - b0) / max(1e-9, t1 - t0)


def wait_quiet(max_busy, timeout_s, sample_s=2.0):
    """Waits (up to `timeout_s` seconds) until the CPUs are busy for at most
    `max_busy` of their time, sampled over `sample_s` seconds: other
    people's work, when the benchmark's own servers are idle. Returns the
    busy fraction measured last."""
    deadline = time.time() + timeout_s
    busy = cpu_busy(sample_s)
    while busy > max_busy and time.time() < deadline:
        busy = cpu_busy(sample_s)
    return busy
