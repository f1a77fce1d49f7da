// How well this machine overlaps a weight stream from memory with the
// integer arithmetic of the GEMM tiles, apart from any kernel's layout:
// --threads threads each stream an equal share of a --mb MiB buffer once,
// 64-byte line by line, doing --triples (dpbusd, conversion, fma) on each
// line, the tiles' inner operation (gemm_quads_avx512.cc). Printed for the
// same work: the stream, the arithmetic alone (the same loop over 64 lines
// that stay in L1) and the memory alone (no arithmetic), in ms, and the
// stream's time over the larger of the other two (1.00: perfect overlap).
// --prefetch_bytes: each line also prefetches the line that far ahead into
// L2 (0: the hardware prefetcher alone). --table_loads: each triple also
// loads its activation vector and its scale from small L1-resident tables,
// as the tiles load theirs (xq, the scale-product table).
//   bazel run -c opt //kernels/cpu:stream_overlap_bench -- --triples=10
//     [--prefetch_bytes=8192] [--table_loads] [--threads=2]
// docs/perf-log/2026-11-29-to-12-01.md (session 11) has what it measured here.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized / -Wuninitialized
// on their own _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/prefetch.h"

ABSL_FLAG(int, threads, 2, "threads, each streaming an equal share");
ABSL_FLAG(int, triples, 8, "dpbusd + conversion + fma per 64-byte line (0-16)");
ABSL_FLAG(int, prefetch_bytes, 8192,
          "L2 prefetch distance ahead of the stream (0: none)");
ABSL_FLAG(bool, table_loads, false,
          "each triple loads its activation vector and scale from L1 tables");
ABSL_FLAG(int, mb, 96, "MiB streamed (the model's weights: ~96)");
ABSL_FLAG(int, reps, 5, "runs (best is reported)");

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace {

namespace k = braid::kernels::cpu;

alignas(64) int32_t g_x_table[64 * 16];
alignas(64) float g_scale_table[256];

// Streams [p, p + bytes) (or, kInL1, its first 64 lines over and over for
// as many lines), C triples a line; returns a value that depends on every
// load and result.
template <int C, bool kInL1, bool kTableLoads>
BRAID_AVX512 float Stream(const uint8_t* p, size_t bytes, int64_t prefetch) {
  // (Indexed, never referenced: an array whose elements are addressed
  // stays in memory, and the prefetch's memory operand then makes GCC store
  // every accumulator before each prefetch: 1.5x slower streams.)
  __m512 acc[C > 0 ? C : 1];
#pragma GCC unroll 16
  for (int c = 0; c < (C > 0 ? C : 1); ++c) acc[c] = _mm512_setzero_ps();
  const __m512 d = _mm512_set1_ps(1e-9f);
  __m512i seen = _mm512_setzero_si512();
  const size_t lines = bytes / 64;
  int rot = 0;
  for (size_t i = 0; i < lines; ++i) {
    const uint8_t* line = p + (kInL1 ? (i & 63) : i) * 64;
    if (!kInL1 && prefetch > 0 && (i + 1) * 64 + prefetch <= bytes) {
      k::PrefetchL2(line + prefetch);
    }
    const __m512i w = _mm512_load_si512(line);
    seen = _mm512_xor_si512(seen, w);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      // The activation vector (a table's or a constant) and scale.
      const int at = (rot + c) & 63;
      const __m512i xv = kTableLoads ? _mm512_load_si512(g_x_table + at * 16)
                                     : _mm512_set1_epi32(0x01020304 + c);
      const __m512 dv = kTableLoads ? _mm512_set1_ps(g_scale_table[at]) : d;
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
      acc[c] = _mm512_fmadd_ps(dv, _mm512_cvtepi32_ps(s), acc[c]);
    }
    rot += 7;
  }
  float sum = static_cast<float>(_mm512_reduce_add_epi32(seen));
#pragma GCC unroll 16
  for (int c = 0; c < (C > 0 ? C : 1); ++c) sum += _mm512_reduce_add_ps(acc[c]);
  return sum;
}

using StreamFn = float (*)(const uint8_t*, size_t, int64_t);

template <bool kInL1, bool kTableLoads, int... C>
StreamFn Pick(int triples, std::integer_sequence<int, C...>) {
  const StreamFn fns[] = {&Stream<C, kInL1, kTableLoads>...};
  return fns[std::clamp(triples, 0, static_cast<int>(sizeof...(C)) - 1)];
}

// The stream function for (triples, in L1, table loads).
StreamFn Choose(int triples, bool in_l1, bool table_loads) {
  const auto seq = std::make_integer_sequence<int, 17>();
  if (in_l1) {
    return table_loads ? Pick<true, true>(triples, seq)
                       : Pick<true, false>(triples, seq);
  }
  return table_loads ? Pick<false, true>(triples, seq)
                     : Pick<false, false>(triples, seq);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!k::UseAvx512()) {
    std::fprintf(stderr, "needs AVX-512 with VNNI\n");
    return 1;
  }
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  const int triples = std::clamp(absl::GetFlag(FLAGS_triples), 0, 16);
  const int64_t prefetch = absl::GetFlag(FLAGS_prefetch_bytes);
  const bool table_loads = absl::GetFlag(FLAGS_table_loads);
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_mb)) << 20;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  std::memset(buf, 1, bytes);
  for (int i = 0; i < 64 * 16; ++i) g_x_table[i] = 0x01010101 * (i % 7 + 1);
  for (int i = 0; i < 256; ++i) g_scale_table[i] = 1e-9f * (i + 1);
  // Best ms of --reps runs of every thread's share through fn.
  auto time = [&](StreamFn fn) {
    double best = 1e18;
    std::vector<float> sink(threads);
    for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      auto share = [&](int i) {
        const size_t part = bytes / threads / 64 * 64;
        sink[i] += fn(buf + i * part, part, prefetch);
      };
      std::vector<std::thread> others;
      for (int i = 1; i < threads; ++i) others.emplace_back(share, i);
      share(0);
      for (std::thread& t : others) t.join();
      best = std::min(best, std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0)
                                .count());
    }
    if (sink[0] == 1.5f) std::printf("!");
    return best;
  };
  const double stream = time(Choose(triples, false, table_loads));
  const double compute = time(Choose(triples, true, table_loads));
  const double memory = time(Choose(0, false, false));
  std::printf(
      "threads %d, %d triples a line, prefetch %ld bytes, table loads %d: "
      "stream %.2f ms (%.1f GB/s), arithmetic alone %.2f ms, memory alone "
      "%.2f ms (%.1f GB/s); stream / max %.2f\n",
      threads, triples, static_cast<long>(prefetch), table_loads, stream,
      bytes / stream / 1e6, compute, memory, bytes / memory / 1e6,
      stream / std::max(compute, memory));
  std::free(buf);
  return 0;
}
