"""Serving metrics with the definitions of vLLM's benchmark_serving.

Pure functions over per-request records; no I/O, no third-party imports, so the
arithmetic is unit-tested on its own (metrics_test.py).

Definitions (all follow vLLM's `calculate_metrics`):
  TTFT   time from sending the request to the first chunk that carries output.
  ITL    the gaps between successive output-carrying chunks of one request,
         pooled over all requests. A chunk that carries several tokens (braid
         coalesces tokens when the client reads slower than the engine writes)
         is one arrival: its tokens arrive at the same time and contribute one
         gap, exactly as vLLM records a multi-token chunk. `multi_token_chunks`
         in the summary says how often that happened.
  TPOT   per request, (E2E - TTFT) / (output_tokens - 1), for requests with more
         than one output token; percentiles are over requests.
  E2E    time from sending the request to its last chunk.
  request throughput    completed requests / benchmark duration.
  output throughput     output tokens of completed requests / duration.
  total token throughput (prompt + output tokens) / duration.
  goodput               completed requests meeting every given SLO
                        (TTFT <= slo_ttft, TPOT <= slo_tpot, E2E <= slo_e2el;
                        a one-token request counts TPOT 0) / duration.
Percentiles interpolate linearly between order statistics (numpy's default).
Times are seconds inside; the summary reports milliseconds like vLLM.
"""
import dataclasses
import math
from typing import Dict, List, Optional, Sequence


@dataclasses.dataclass
class RequestResult:
    """What the client observed for one request."""
    ok: bool = False
    error: str = ""
    cancelled: bool = False
    prompt_tokens: int = 0
    output_tokens: int = 0
    start: float = 0.0        # perf_counter() when the request was sent
    ttft: float = 0.0         # seconds from `start` to the first output chunk
    latency: float = 0.0      # seconds from `start` to the last chunk
    itl: List[float] = dataclasses.field(default_factory=list)
    # Absolute arrival time and token count of every output-carrying chunk.
    chunk_times: List[float] = dataclasses.field(default_factory=list)
    chunk_tokens: List[int] = dataclasses.field(default_factory=list)

    def add_chunk(self, t: float, ntokens: int) -> None:
        """Records an output-carrying chunk that arrived at perf_counter() t."""
        if not self.chunk_times:
            self.ttft = t - self.start
        else:
            self.itl.append(t - self.chunk_times[-1])
        self.chunk_times.append(t)
        self.chunk_tokens.append(ntokens)
        self.latency = t - self.start

    def to_json(self) -> Dict:
        return dataclasses.asdict(self)


def percentile(values: Sequence[float], p: float) -> float:
    """numpy.percentile(values, p) with linear interpolation; 0 when empty."""
    if not values:
        return 0.0
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    frac = rank - lo
    return float(xs[lo] + (xs[hi] - xs[lo]) * frac)


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def stdev(values: Sequence[float]) -> float:
    """Population standard deviation (numpy.std's default)."""
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def tpot(r: RequestResult) -> Optional[float]:
    """(E2E - TTFT) / (output_tokens - 1), or None for <= 1 output token."""
    if r.output_tokens <= 1:
        return None
    return (r.latency - r.ttft) / (r.output_tokens - 1)


def _stats(name: str, values_s: Sequence[float], pcts: Sequence[float]) -> Dict:
    out = {
        f"mean_{name}_ms": mean(values_s) * 1000,
        f"median_{name}_ms": percentile(values_s, 50) * 1000,
        f"std_{name}_ms": stdev(values_s) * 1000,
    }
    for p in pcts:
        out[f"p{p:g}_{name}_ms"] = percentile(values_s, p) * 1000
    return out


def summarize(results: Sequence[RequestResult], duration_s: float,
              slo_ttft_ms: Optional[float] = None,
              slo_tpot_ms: Optional[float] = None,
              slo_e2el_ms: Optional[float] = None,
              percentiles: Sequence[float] = (50, 90, 99)) -> Dict:
    """The benchmark summary vLLM prints, as a dict (times in ms)."""
    done = [r for r in results if r.ok]
    ttfts = [r.ttft for r in done]
    e2els = [r.latency for r in done]
    tpots = [t for t in (tpot(r) for r in done) if t is not None]
    all_tpots = [tpot(r) or 0.0 for r in done]
    itls = [gap for r in done for gap in r.itl]
    total_in = sum(r.prompt_tokens for r in done)
    total_out = sum(r.output_tokens for r in done)

    slos = []
    if slo_ttft_ms is not None:
        slos.append((ttfts, slo_ttft_ms / 1000))
    if slo_tpot_ms is not None:
        slos.append((all_tpots, slo_tpot_ms / 1000))
    if slo_e2el_ms is not None:
        slos.append((e2els, slo_e2el_ms / 1000))
    good = 0
    if slos:
        for i in range(len(done)):
            good += all(vals[i] <= limit for vals, limit in slos)

    dur = duration_s if duration_s > 0 else float("nan")
    out = {
        "completed": len(done),
        "failed": len(results) - len(done),
        "duration_s": duration_s,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / dur,
        "output_throughput": total_out / dur,
        "total_token_throughput": (total_in + total_out) / dur,
        "request_goodput": (good / dur) if slos else None,
        "good_requests": good if slos else None,
        "num_itl_gaps": len(itls),
        "multi_token_chunks": sum(1 for r in done for n in r.chunk_tokens if n > 1),
    }
    out.update(_stats("ttft", ttfts, percentiles))
    out.update(_stats("tpot", tpots, percentiles))
    out.update(_stats("itl", itls, percentiles))
    out.update(_stats("e2el", e2els, percentiles))
    return out


def gaps_in_window(results: Sequence[RequestResult], t0: float, t1: float,
                   overlap: bool) -> List[float]:
    """Inter-chunk gaps of `results`, pooled, selected by time window.

    overlap=False: gaps lying entirely inside [t0, t1].
    overlap=True:  gaps whose interval (previous arrival, arrival) intersects
                   (t0, t1): every gap a stall during the window lengthened.
    """
    out = []
    for r in results:
        ts = r.chunk_times
        for prev, cur in zip(ts, ts[1:]):
            if overlap:
                if cur > t0 and prev < t1:
                    out.append(cur - prev)
            elif prev >= t0 and cur <= t1:
                out.append(cur - prev)
    return out


def format_table(title: str, s: Dict, percentiles: Sequence[float] = (50, 99)) -> str:
    """vLLM-style readable summary of `summarize()`'s dict."""
    lines = []

    def row(label, value, fmt="{:.2f}"):
        v = "n/a" if value is None else (fmt.format(value) if isinstance(value, float) else str(value))
        lines.append(f"{label:<40}{v:>12}")

    lines.append(f"{' ' + title + ' ':=^52}")
    row("Successful requests:", s["completed"])
    row("Failed requests:", s["failed"])
    row("Benchmark duration (s):", s["duration_s"])
    row("Total input tokens:", s["total_input_tokens"])
    row("Total generated tokens:", s["total_output_tokens"])
    row("Request throughput (req/s):", s["request_throughput"])
    row("Output token throughput (tok/s):", s["output_throughput"])
    row("Total token throughput (tok/s):", s["total_token_throughput"])
    if s.get("request_goodput") is not None:
        row("Request goodput (req/s):", s["request_goodput"])
    for key, head in (("ttft", "Time to First Token"),
                      ("tpot", "Time per Output Token (excl. 1st token)"),
                      ("itl", "Inter-token Latency"),
                      ("e2el", "End-to-end Latency")):
        lines.append(f"{head:-^52}")
        row(f"Mean {key.upper()} (ms):", s[f"mean_{key}_ms"])
        row(f"Median {key.upper()} (ms):", s[f"median_{key}_ms"])
        for p in percentiles:
            k = f"p{p:g}_{key}_ms"
            if k in s and p != 50:
                row(f"P{p:g} {key.upper()} (ms):", s[k])
    if s.get("multi_token_chunks"):
        lines.append(f"(chunks carrying several tokens: {s['multi_token_chunks']}; "
                     "each is one ITL arrival)")
    lines.append("=" * 52)
    return "\n".join(lines)
