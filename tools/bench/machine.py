"""What the benchmarks say of the machine they ran on."""
import os
import platform


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
