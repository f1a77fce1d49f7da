// AVX-512 forms of the attention kernels (dot.h): the F16 dots in ggml's
// orders, the F16 axpy and the f32 add. One 512-bit register holds exactly
// the lanes the AVX2 forms keep in two 256-bit halves (lanes 0..7 and 8..15
// of ggml's accumulators), and every lane sees the same operations in the
// same order, so results are bit-identical to the AVX2 and scalar forms; on
// CPUs with full-width AVX-512 units they take half the instructions.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/quant/dot.h"

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX512 inline __m512 LoadF16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// ReduceAdd16's order: lanes i + (i + 8), then HorizontalSum8's tree.
BRAID_AVX512 inline float Reduce16(__m512 v) {
  return HorizontalSum8(
      _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

BRAID_AVX512 inline float DotVec(const uint16_t* x, const float* y, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  const int64_t np = n - n % 64;
  for (int64_t i = 0; i < np; i += 64) {
    a0 = _mm512_fmadd_ps(LoadF16x16(x + i), _mm512_loadu_ps(y + i), a0);
    a1 = _mm512_fmadd_ps(LoadF16x16(x + i + 16), _mm512_loadu_ps(y + i + 16),
                         a1);
    a2 = _mm512_fmadd_ps(LoadF16x16(x + i + 32), _mm512_loadu_ps(y + i + 32),
                         a2);
    a3 = _mm512_fmadd_ps(LoadF16x16(x + i + 48), _mm512_loadu_ps(y + i + 48),
                         a3);
  }
  a0 = _mm512_add_ps(a0, a2);
  a1 = _mm512_add_ps(a1, a3);
  a0 = _mm512_add_ps(a0, a1);
  double sum = Reduce16(a0);
  for (int64_t i = np; i < n; ++i) sum += _cvtsh_ss(x[i]) * y[i];
  return static_cast<float>(sum);
}

BRAID_AVX512 inline float DotGemm(const uint16_t* x, const float* y,
                                  int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    acc = _mm512_fmadd_ps(LoadF16x16(x + i), _mm512_loadu_ps(y + i), acc);
  }
  return Reduce16(acc);
}

BRAID_AVX512 inline void Axpy(float a, const uint16_t* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(
        y + i, _mm512_fmadd_ps(va, LoadF16x16(x + i), _mm512_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fmaf(a, _cvtsh_ss(x[i]), y[i]);
}

}  // namespace

BRAID_AVX512 void DotF16F32VecRowsAvx512(const uint16_t* const* xs,
                                         int64_t count, const float* y,
                                         int64_t n, float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = DotVec(xs[r], y, n);
}

BRAID_AVX512 void DotF16F32GemmRowsAvx512(const uint16_t* const* xs,
                                          int64_t count, const float* y,
                                          int64_t n, float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = DotGemm(xs[r], y, n);
}

BRAID_AVX512 void AxpyF16RowsAvx512(const float* a, const uint16_t* const* xs,
                                    float* const* ys, int64_t count,
                                    int64_t n) {
  for (int64_t r = 0; r < count; ++r) Axpy(a[r], xs[r], ys[r], n);
}

BRAID_AVX512 void AddF32Avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(
        y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] += x[i];
}

}  // namespace braid::kernels::cpu::internal
