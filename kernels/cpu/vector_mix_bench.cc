// Throughput of the 512-bit operations the exact GEMM tiles are made of,
// alone and in the mixes the tiles use, on one thread: each line runs 12
// independent chains of one group of operations for 20M iterations and
// prints the time per group (best of 3), so which operations share
// execution ports shows as groups that cost the sum of their parts. The
// activation operand comes from a small L1 table through a pointer the
// compiler cannot see through, so every group does its own work.
//   bazel run -c opt //kernels/cpu:vector_mix_bench
// docs/perf-log/2026-11-29-to-12-01.md (issue 3, session 14) has what it measured here.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "kernels/cpu/cpu_features.h"

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace {

alignas(64) float g_scales[64];
alignas(64) double g_pairs[64];
alignas(64) int32_t g_x[12 * 16];

enum Mix {
  kLoadAdd,      // activation load + add (the baseline)
  kDpbusd,       // dpbusd from a zero start + add
  kDpbusdCvt,    // dpbusd + conversion + add
  kDpbusdFma,    // dpbusd + fma (32-bit broadcast operand)
  kCvtFma,       // conversion + fma
  kMulFma,       // mul + fma
  kTriple,       // dpbusd + conversion + fma
  kTripleBcast,  // dpbusd + conversion + 64-bit broadcast + fma (the tiles')
  kTripleMul,    // dpbusd + conversion + mul + fma
  kTripleFmsub,  // dpbusd from 1.5 * 2^23's bits + fmsub + fma (no conversion)
};

template <Mix M>
BRAID_AVX512 __attribute__((noinline)) float Run(int64_t n) {
  __m512 f[12];
  __m512i w = _mm512_set1_epi32(0x01020304);
  __m512 dw = _mm512_set1_ps(1.0f);
  const __m512i zero = _mm512_setzero_si512();
  for (int i = 0; i < 12; ++i) f[i] = _mm512_set1_ps(static_cast<float>(i));
  const int32_t* px = g_x;
  for (int64_t k = 0; k < n; ++k) {
    asm volatile("" : "+v"(w), "+v"(dw), "+r"(px));
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      const __m512i x = _mm512_load_si512(px + 16 * i);
      const __m512 s = _mm512_set1_ps(g_scales[i]);
      const __m512 pair = _mm512_castpd_ps(_mm512_set1_pd(g_pairs[i]));
      if constexpr (M == kLoadAdd) {
        f[i] = _mm512_add_ps(_mm512_castsi512_ps(x), f[i]);
      } else if constexpr (M == kDpbusd) {
        f[i] = _mm512_add_ps(
            _mm512_castsi512_ps(_mm512_dpbusd_epi32(zero, w, x)), f[i]);
      } else if constexpr (M == kDpbusdCvt) {
        f[i] = _mm512_add_ps(
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, w, x)), f[i]);
      } else if constexpr (M == kDpbusdFma) {
        f[i] = _mm512_fmadd_ps(
            _mm512_castsi512_ps(_mm512_dpbusd_epi32(zero, w, x)), s, f[i]);
      } else if constexpr (M == kCvtFma) {
        f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), s, f[i]);
      } else if constexpr (M == kMulFma) {
        f[i] =
            _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_castsi512_ps(x)), s, f[i]);
      } else if constexpr (M == kTriple) {
        f[i] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, w, x)), s, f[i]);
      } else if constexpr (M == kTripleBcast) {
        f[i] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, w, x)), pair, f[i]);
      } else if constexpr (M == kTripleFmsub) {
        const __m512i magic = _mm512_set1_epi32(0x4B400000);
        f[i] = _mm512_fmadd_ps(
            dw,
            _mm512_fmsub_ps(
                _mm512_castsi512_ps(_mm512_dpbusd_epi32(magic, w, x)), s,
                _mm512_mul_ps(s, _mm512_set1_ps(12582912.0f))),
            f[i]);
      } else {
        f[i] = _mm512_fmadd_ps(
            _mm512_mul_ps(dw,
                          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, w, x))),
            s, f[i]);
      }
    }
  }
  float sum = 0;
  for (int i = 0; i < 12; ++i) sum += _mm512_reduce_add_ps(f[i]);
  return sum;
}

template <Mix M>
void Bench(const char* name) {
  constexpr int64_t kIters = 20000000;
  Run<M>(kIters / 10);  // warm up (clock)
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float sink = Run<M>(kIters);
    (void)sink;
    const double ns = std::chrono::duration<double, std::nano>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
    if (ns < best) best = ns;
  }
  std::printf("%-52s %.4f ns a group\n", name, best / (kIters * 12.0));
}

// The clock, from a chain of dependent integer adds (one a cycle).
double ClockGhz() {
  constexpr int64_t kAdds = 400000000;
  uint64_t x = 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < kAdds; ++k) asm volatile("add $1, %0" : "+r"(x));
  const double ns = std::chrono::duration<double, std::nano>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  return kAdds / ns;
}

}  // namespace

int main() {
  if (!braid::kernels::cpu::UseAvx512()) {
    std::fprintf(stderr, "needs AVX-512 with VNNI\n");
    return 1;
  }
  for (int i = 0; i < 12 * 16; ++i) g_x[i] = 0x01010101 * (i % 7);
  for (int i = 0; i < 64; ++i) {
    g_scales[i] = 1.0f;
    g_pairs[i] = 1.0;
  }
  std::printf("clock (dependent adds): %.2f GHz\n", ClockGhz());
  Bench<kLoadAdd>("load + add");
  Bench<kDpbusd>("dpbusd (zero start) + add");
  Bench<kDpbusdCvt>("dpbusd + conversion + add");
  Bench<kDpbusdFma>("dpbusd + fma");
  Bench<kCvtFma>("conversion + fma");
  Bench<kMulFma>("mul + fma");
  Bench<kTriple>("dpbusd + conversion + fma");
  Bench<kTripleBcast>("dpbusd + conversion + 64-bit broadcast + fma");
  Bench<kTripleMul>("dpbusd + conversion + mul + fma");
  Bench<kTripleFmsub>("dpbusd (1.5 * 2^23 start) + fmsub + fma");
  return 0;
}
