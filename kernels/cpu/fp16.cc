#include "kernels/cpu/fp16.h"

#include <immintrin.h>

#include "kernels/cpu/cpu_features.h"

namespace braid::kernels::cpu {
namespace {

__attribute__((target("avx2,f16c"))) void Fp16ToFp32RowF16c(const uint16_t* x,
                                                            float* y,
                                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}

__attribute__((target("avx2,f16c"))) void Fp32ToFp16RowF16c(const float* x,
                                                            uint16_t* y,
                                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}

__attribute__((target("avx2,f16c"))) void RoundToFp16RowF16c(const float* x,
                                                             float* y,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

}  // namespace

void RoundToFp16Row(const float* x, float* y, int64_t n) {
  if (UseAvx2()) return RoundToFp16RowF16c(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

void Fp16ToFp32Row(const uint16_t* x, float* y, int64_t n) {
  if (UseAvx2()) return Fp16ToFp32RowF16c(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}

void Fp32ToFp16Row(const float* x, uint16_t* y, int64_t n) {
  if (UseAvx2()) return Fp32ToFp16RowF16c(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}

void Bf16ToFp32Row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFp32(x[i]);
}

void Fp32ToBf16Row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToBf16(x[i]);
}

}  // namespace braid::kernels::cpu
