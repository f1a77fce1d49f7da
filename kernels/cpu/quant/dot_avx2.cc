// AVX2 + FMA + F16C dot products. Compiled with target attributes so the binary
// still runs (through the scalar path) on CPUs without AVX2. Integer block sums
// follow ggml's x86 kernels: nibbles unpacked to bytes, maddubs, madd, fma.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/quant/dot.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline float HorizontalSum(__m256 v) { return HorizontalSum8(v); }

// Sum of products of unsigned bytes ax and signed bytes sy, as 8 floats.
BRAID_AVX2 inline __m256 MulSumU8I8(__m256i ax, __m256i sy) {
  const __m256i dot16 = _mm256_maddubs_epi16(ax, sy);
  const __m256i dot32 = _mm256_madd_epi16(dot16, _mm256_set1_epi16(1));
  return _mm256_cvtepi32_ps(dot32);
}

// Sum of products of two signed byte vectors, as 8 floats.
BRAID_AVX2 inline __m256 MulSumI8I8(__m256i x, __m256i y) {
  return MulSumU8I8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

}  // namespace

BRAID_AVX2 float DotQ4_0Q8_0Avx2(const BlockQ4_0* w, const BlockQ8_0* x,
                                 int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw = _mm256_sub_epi8(UnpackNibbles(w[i].qs), off);
    const __m256i qx =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    acc = _mm256_fmadd_ps(d, MulSumI8I8(qw, qx), acc);
  }
  return HorizontalSum(acc);
}

BRAID_AVX2 float DotQ4_1Q8_1Avx2(const BlockQ4_1* w, const BlockQ8_1* x,
                                 int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float dw = H2F(w[i].d);
    summs += H2F(w[i].m) * H2F(x[i].s);
    const __m256 d = _mm256_set1_ps(dw * H2F(x[i].d));
    const __m256i qw = UnpackNibbles(w[i].qs);
    const __m256i qx =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    acc = _mm256_fmadd_ps(d, MulSumU8I8(qw, qx), acc);
  }
  return HorizontalSum(acc) + summs;
}

BRAID_AVX2 float DotQ8_0Q8_0Avx2(const BlockQ8_0* w, const BlockQ8_0* x,
                                 int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs));
    const __m256i qx =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    acc = _mm256_fmadd_ps(d, MulSumI8I8(qw, qx), acc);
  }
  return HorizontalSum(acc);
}

// The 5-bit and IQ4_NL types: Q4_0's and Q4_1's arithmetic with their
// values (dot_k.cc has their scalar path), except Q5_0's float steps: a
// block's exact integer sum, then sum = fma(isum, d_w * d_x, sum) in block
// order, the scalar path's arithmetic (and the octet tiles', gemm_octets.h,
// whose 8 rows a vector take it with no horizontal step a block).
BRAID_AVX2 float DotQ5_0Q8_0Avx2(const BlockQ5_0* w, const BlockQ8_0* x,
                                 int64_t n) {
  float sum = 0.0f;
  const __m256i off = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qw = _mm256_sub_epi8(
        _mm256_or_si256(UnpackNibbles(w[i].qs), FifthBits(w[i].qh)), off);
    const __m256i qx =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
    const int32_t isum = HorizontalSumI32(
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw),
                                               _mm256_sign_epi8(qx, qw)),
                          _mm256_set1_epi16(1)));
    sum = std::fma(static_cast<float>(isum), H2F(w[i].d) * H2F(x[i].d), sum);
  }
  return sum;
}

BRAID_AVX2 float DotQ5_1Q8_1Avx2(const BlockQ5_1* w, const BlockQ8_1* x,
                                 int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    summs += H2F(w[i].m) * H2F(x[i].s);
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw =
        _mm256_or_si256(UnpackNibbles(w[i].qs), FifthBits(w[i].qh));
    acc = _mm256_fmadd_ps(
        d,
        MulSumU8I8(
            qw, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs))),
        acc);
  }
  return HorizontalSum8(acc) + summs;
}

BRAID_AVX2 float DotIQ4_NLQ8_0Avx2(const BlockIQ4_NL* w, const BlockQ8_0* x,
                                   int64_t n) {
  const __m256i table = Iq4NlTable(kIq4NlValues);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw = _mm256_shuffle_epi8(table, UnpackNibbles(w[i].qs));
    acc = _mm256_fmadd_ps(
        d,
        MulSumI8I8(
            qw, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs))),
        acc);
  }
  return HorizontalSum8(acc);
}

namespace {

BRAID_AVX2 inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
BRAID_AVX2 inline __m256 LoadBF16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// dot.h's order for rows of floats (DotFloatRow in dot_scalar.cc): lanes
// 0..7 in acc0, 8..15 in acc1.
template <typename Load8, typename Load1>
BRAID_AVX2 inline float DotFloatRowAvx2(Load8 load8, Load1 load1,
                                        const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load8(i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), acc0);
    i += 8;
  }
  float sum = ReduceAdd16(acc0, acc1);
  for (; i < n; ++i) sum = std::fmaf(load1(i), x[i], sum);
  return sum;
}

}  // namespace

BRAID_AVX2 float DotF32F32Avx2(const float* w, const float* x, int64_t n) {
  return DotFloatRowAvx2([w](int64_t i)
                             BRAID_AVX2 { return _mm256_loadu_ps(w + i); },
                         [w](int64_t i) { return w[i]; }, x, n);
}

BRAID_AVX2 float DotF16F32Avx2(const uint16_t* w, const float* x, int64_t n) {
  return DotFloatRowAvx2([w](int64_t i) BRAID_AVX2 { return LoadF16(w + i); },
                         [w](int64_t i) { return H2F(w[i]); }, x, n);
}

BRAID_AVX2 float DotBF16F32Avx2(const uint16_t* w, const float* x, int64_t n) {
  return DotFloatRowAvx2([w](int64_t i) BRAID_AVX2 { return LoadBF16(w + i); },
                         [w](int64_t i) {
                           const uint32_t bits = static_cast<uint32_t>(w[i])
                                                 << 16;
                           float f;
                           __builtin_memcpy(&f, &bits, 4);
                           return f;
                         },
                         x, n);
}

BRAID_AVX2 void AddF32Avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] += x[i];
}

// acc + x[0..8) * y[0..8), x in fp16.
BRAID_AVX2 inline __m256 FmaF16(const uint16_t* x, const float* y, __m256 acc) {
  return _mm256_fmadd_ps(LoadF16(x), _mm256_loadu_ps(y), acc);
}

BRAID_AVX2 float DotF16F32VecAvx2(const uint16_t* x, const float* y,
                                  int64_t n) {
  // aN_lo / aN_hi are lanes 0..7 / 8..15 of ggml's accumulator N.
  __m256 a0_lo = _mm256_setzero_ps(), a0_hi = _mm256_setzero_ps();
  __m256 a1_lo = _mm256_setzero_ps(), a1_hi = _mm256_setzero_ps();
  __m256 a2_lo = _mm256_setzero_ps(), a2_hi = _mm256_setzero_ps();
  __m256 a3_lo = _mm256_setzero_ps(), a3_hi = _mm256_setzero_ps();
  const int64_t np = n - n % 64;
  for (int64_t i = 0; i < np; i += 64) {
    a0_lo = FmaF16(x + i, y + i, a0_lo);
    a0_hi = FmaF16(x + i + 8, y + i + 8, a0_hi);
    a1_lo = FmaF16(x + i + 16, y + i + 16, a1_lo);
    a1_hi = FmaF16(x + i + 24, y + i + 24, a1_hi);
    a2_lo = FmaF16(x + i + 32, y + i + 32, a2_lo);
    a2_hi = FmaF16(x + i + 40, y + i + 40, a2_hi);
    a3_lo = FmaF16(x + i + 48, y + i + 48, a3_lo);
    a3_hi = FmaF16(x + i + 56, y + i + 56, a3_hi);
  }
  a0_lo = _mm256_add_ps(a0_lo, a2_lo);
  a0_hi = _mm256_add_ps(a0_hi, a2_hi);
  a1_lo = _mm256_add_ps(a1_lo, a3_lo);
  a1_hi = _mm256_add_ps(a1_hi, a3_hi);
  a0_lo = _mm256_add_ps(a0_lo, a1_lo);
  a0_hi = _mm256_add_ps(a0_hi, a1_hi);
  double sum = ReduceAdd16(a0_lo, a0_hi);
  for (int64_t i = np; i < n; ++i) sum += H2F(x[i]) * y[i];
  return static_cast<float>(sum);
}

BRAID_AVX2 float DotF16F32GemmAvx2(const uint16_t* x, const float* y,
                                   int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    lo = FmaF16(x + i, y + i, lo);
    hi = FmaF16(x + i + 8, y + i + 8, hi);
  }
  return ReduceAdd16(lo, hi);
}

BRAID_AVX2 void AxpyF16Avx2(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_fmadd_ps(va, LoadF16(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fmaf(a, H2F(x[i]), y[i]);
}

// The row loops inline the single-row kernels above (flatten), so one row's
// reduction overlaps the next row's products.
__attribute__((flatten)) BRAID_AVX2 void DotF16F32VecRowsAvx2(
    const uint16_t* const* xs, int64_t count, const float* y, int64_t n,
    float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = DotF16F32VecAvx2(xs[r], y, n);
}

__attribute__((flatten)) BRAID_AVX2 void DotF16F32GemmRowsAvx2(
    const uint16_t* const* xs, int64_t count, const float* y, int64_t n,
    float* out) {
  for (int64_t r = 0; r < count; ++r) out[r] = DotF16F32GemmAvx2(xs[r], y, n);
}

__attribute__((flatten)) BRAID_AVX2 void AxpyF16RowsAvx2(
    const float* a, const uint16_t* const* xs, float* const* ys, int64_t count,
    int64_t n) {
  for (int64_t r = 0; r < count; ++r) AxpyF16Avx2(a[r], xs[r], ys[r], n);
}

}  // namespace braid::kernels::cpu::internal
