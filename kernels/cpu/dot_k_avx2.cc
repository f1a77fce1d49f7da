// AVX2 dots of the 5-bit, IQ4_NL and K-quant weight types (dot_k.cc has the
// scalar path and the arithmetic both follow). Unsigned weight values times
// signed Q8 activations go through maddubs (pairs of at most 2 * 63 * 127, no
// saturation), then madd by the sub-block scales into 32-bit lanes.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/ggml_reduce.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

BRAID_AVX2 inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

BRAID_AVX2 inline int HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
                            _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// 16 bytes of packed nibbles -> 32 bytes: low nibbles, then high nibbles.
BRAID_AVX2 inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp),
                                                _mm_srli_epi16(tmp, 4), 1);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
}

// Byte j = 0x10 where bit j of the 32 bits at qh is set, else 0.
BRAID_AVX2 inline __m256i FifthBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                         0x0202020202020202, 0x0303030303030303));
  const __m256i mask = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Sum of products of unsigned bytes ax and signed bytes sy, as 8 floats.
BRAID_AVX2 inline __m256 MulSumU8I8(__m256i ax, __m256i sy) {
  const __m256i dot16 = _mm256_maddubs_epi16(ax, sy);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
}

BRAID_AVX2 inline __m256 MulSumI8I8(__m256i x, __m256i y) {
  return MulSumU8I8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// 32-bit lanes of scale_a * (pairs of the first 16 products) + scale_b * (of
// the last 16), for unsigned values u and signed q8 (32 each).
BRAID_AVX2 inline __m256i ScaledPairSums(__m256i u, __m256i q8, int scale_a,
                                         int scale_b) {
  const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(scale_b),
                                          _mm_set1_epi16(scale_a));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, q8), scales);
}

// The same with one scale for all 32.
BRAID_AVX2 inline __m256i ScaledSums(__m256i u, __m256i q8, int scale) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, q8),
                           _mm256_set1_epi16(scale));
}

// Bits [shift, shift + width) of each byte of v, at the byte's bottom.
BRAID_AVX2 inline __m256i ByteBits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(mask));
}

}  // namespace

BRAID_AVX2 float DotQ5_0Q8_0Avx2(const BlockQ5_0* w, const BlockQ8_0* x,
                                 int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(16);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw = _mm256_sub_epi8(
        _mm256_or_si256(UnpackNibbles(w[i].qs), FifthBits(w[i].qh)), off);
    acc = _mm256_fmadd_ps(d, MulSumI8I8(qw, Load256(x[i].qs)), acc);
  }
  return HorizontalSum8(acc);
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
    acc = _mm256_fmadd_ps(d, MulSumU8I8(qw, Load256(x[i].qs)), acc);
  }
  return HorizontalSum8(acc) + summs;
}

BRAID_AVX2 float DotIQ4_NLQ8_0Avx2(const BlockIQ4_NL* w, const BlockQ8_0* x,
                                   int64_t n) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(H2F(w[i].d) * H2F(x[i].d));
    const __m256i qw = _mm256_shuffle_epi8(table, UnpackNibbles(w[i].qs));
    acc = _mm256_fmadd_ps(d, MulSumI8I8(qw, Load256(x[i].qs)), acc);
  }
  return HorizontalSum8(acc);
}

BRAID_AVX2 float DotQ2_KQ8_KAvx2(const BlockQ2_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ2_K& b = w[i];
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = Load256(b.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int s = 8 * h + 2 * j;
        const __m256i u = ByteBits(bits, 2 * j, 3);
        acc = _mm256_add_epi32(
            acc, ScaledPairSums(u, Load256(x[i].qs + 16 * s),
                                b.scales[s] & 0xF, b.scales[s + 1] & 0xF));
      }
    }
    int msum = 0;
    for (int s = 0; s < 16; ++s) msum += (b.scales[s] >> 4) * x[i].bsums[s];
    sum = KQuantAccumulate(sum, H2F(b.d) * x[i].d, H2F(b.dmin) * x[i].d,
                           HorizontalSumI32(acc), msum);
  }
  return sum;
}

BRAID_AVX2 float DotQ3_KQ8_KAvx2(const BlockQ3_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ3_K& b = w[i];
    int sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = ScaleQ3K(s, b.scales);
    const __m256i hmask = Load256(b.hmask);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = Load256(b.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int s = 8 * h + 2 * j;
        const __m256i u = _mm256_or_si256(
            ByteBits(bits, 2 * j, 3),
            _mm256_slli_epi16(ByteBits(hmask, 4 * h + j, 1), 2));
        acc = _mm256_add_epi32(
            acc, ScaledPairSums(u, Load256(x[i].qs + 16 * s), sc[s], sc[s + 1]));
      }
    }
    int correction = 0;
    for (int s = 0; s < 16; ++s) correction += sc[s] * x[i].bsums[s];
    sum = KQuantAccumulate(sum, H2F(b.d) * x[i].d, 0.0f,
                           HorizontalSumI32(acc) - 4 * correction, 0);
  }
  return sum;
}

namespace {

// Q4_K and Q5_K: four groups of 64 elements, 32 bytes of nibbles each (low:
// sub-block 2g, high: 2g + 1); Q5_K's fifth bits from qh (bit s of byte l).
template <bool kQ5, typename Block>
BRAID_AVX2 inline float DotQ45KAvx2(const Block* w, const BlockQ8_K* x,
                                    int64_t n) {
  float sum = 0.0f;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const Block& b = w[i];
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) ScaleMinK4(s, b.scales, &sc[s], &m[s]);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kQ5) qh = Load256(b.qh);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i bits = Load256(b.qs + 32 * g);
      __m256i lo = _mm256_and_si256(bits, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
      if constexpr (kQ5) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(ByteBits(qh, 2 * g, 1), 4));
        hi = _mm256_or_si256(hi,
                             _mm256_slli_epi16(ByteBits(qh, 2 * g + 1, 1), 4));
      }
      acc = _mm256_add_epi32(
          acc, ScaledSums(lo, Load256(x[i].qs + 64 * g), sc[2 * g]));
      acc = _mm256_add_epi32(
          acc, ScaledSums(hi, Load256(x[i].qs + 64 * g + 32), sc[2 * g + 1]));
    }
    int msum = 0;
    for (int s = 0; s < 8; ++s) {
      msum += m[s] * (x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
    }
    sum = KQuantAccumulate(sum, H2F(b.d) * x[i].d, H2F(b.dmin) * x[i].d,
                           HorizontalSumI32(acc), msum);
  }
  return sum;
}

}  // namespace

BRAID_AVX2 float DotQ4_KQ8_KAvx2(const BlockQ4_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotQ45KAvx2<false>(w, x, n);
}

BRAID_AVX2 float DotQ5_KQ8_KAvx2(const BlockQ5_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotQ45KAvx2<true>(w, x, n);
}

BRAID_AVX2 float DotQ6_KQ8_KAvx2(const BlockQ6_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  float sum = 0.0f;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6_K& b = w[i];
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = Load256(b.ql + 64 * h);
      const __m256i ql1 = Load256(b.ql + 64 * h + 32);
      const __m256i qh = Load256(b.qh + 32 * h);
      const __m256i low[4] = {
          _mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
          _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
          _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * h + 2 * k;
        const __m256i u = _mm256_or_si256(
            low[k], _mm256_slli_epi16(ByteBits(qh, 2 * k, 3), 4));
        acc = _mm256_add_epi32(
            acc, ScaledPairSums(u, Load256(x[i].qs + 16 * s), b.scales[s],
                                b.scales[s + 1]));
      }
    }
    int correction = 0;
    for (int s = 0; s < 16; ++s) correction += b.scales[s] * x[i].bsums[s];
    sum = KQuantAccumulate(sum, H2F(b.d) * x[i].d, 0.0f,
                           HorizontalSumI32(acc) - 32 * correction, 0);
  }
  return sum;
}

}  // namespace braid::kernels::cpu::internal
