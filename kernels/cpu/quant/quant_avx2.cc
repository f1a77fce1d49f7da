// AVX2 activation quantizers: ggml's x86 quantize_row_q8_0 / q8_1 (max |x|
// over the block, id = 127 / amax, round half to even), giving the same
// blocks as the scalar versions in quant.cc.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quant/quant.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {
namespace {

// Quantizes the 32 floats at x into q[32]; returns d and the sum of q.
BRAID_AVX2 inline float QuantizeBlock(const float* x, int8_t* q, int* sum) {
  __m256 v[4];
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 max_abs = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign, v[k]));
  }
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(max_abs, 1),
                         _mm256_castps256_ps128(max_abs));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i i[4];
  for (int k = 0; k < 4; ++k) {
    i[k] = _mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(v[k], id),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]),
                                     _mm256_add_epi32(i[2], i[3]));
  __m128i s4 =
      _mm_add_epi32(_mm256_extracti128_si256(s, 1), _mm256_castsi256_si128(s));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
  *sum = _mm_cvtsi128_si32(s4);
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                                       _mm256_packs_epi32(i[2], i[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(
                          p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return d;
}

BRAID_AVX2 inline uint16_t ToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

BRAID_AVX2 void QuantizeRowQ8_0Avx2(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    y[b].d = ToHalf(QuantizeBlock(x + b * kQK, y[b].qs, &sum));
  }
}

BRAID_AVX2 void QuantizeRowQ8_1Avx2(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    const float d = QuantizeBlock(x + b * kQK, y[b].qs, &sum);
    y[b].d = ToHalf(d);
    y[b].s = ToHalf(d * static_cast<float>(sum));
  }
}

// ggml's quantize_row_q8_K, block by block as QuantizeRowQ8_KScalar: the
// first element of the largest magnitude sets iscale = -127 / it, each q is
// min(127, iscale * x rounded half to even) (the products lie within
// [-127, 127] but for rounding, so the saturating packs clamp alike), and
// bsums are the q's sums over 16.
BRAID_AVX2 void QuantizeRowQ8_KAvx2(const float* x, BlockQ8_K* y, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& out = y[b];
    __m256 max_abs = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K / 8; ++k) {
      max_abs = _mm256_max_ps(
          max_abs, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
    }
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(max_abs, 1),
                           _mm256_castps256_ps128(max_abs));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.0f) {
      std::memset(&out, 0, sizeof(BlockQ8_K));
      continue;
    }
    // The first element whose magnitude is amax, with its sign.
    const __m256 want = _mm256_set1_ps(amax);
    float max = 0.0f;
    for (int k = 0; k < kQK_K / 8; ++k) {
      const int hits = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)),
                        want, _CMP_EQ_OQ));
      if (hits != 0) {
        max = x[8 * k + __builtin_ctz(hits)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int h = 0; h < 2; ++h) {  // 128 values: 8 bsums
      __m256i quads[4];
      for (int c = 0; c < 4; ++c) {
        const float* xc = x + 128 * h + 32 * c;
        __m256i i[4];
        for (int k = 0; k < 4; ++k) {
          i[k] = _mm256_cvtps_epi32(
              _mm256_mul_ps(_mm256_loadu_ps(xc + 8 * k), is));
        }
        const __m256i q = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
                               _mm256_packs_epi32(i[2], i[3])),
            order);
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(out.qs + 128 * h + 32 * c), q);
        quads[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      }
      // Lanes [g0 g2 g4 g6 | g1 g3 g5 g7] of the 16-sums, then in order.
      const __m256i sums = _mm256_permutevar8x32_epi32(
          _mm256_hadd_epi32(_mm256_hadd_epi32(quads[0], quads[1]),
                            _mm256_hadd_epi32(quads[2], quads[3])),
          order);
      const __m256i packed = _mm256_packs_epi32(sums, sums);
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(out.bsums + 8 * h),
          _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
    }
    out.d = 1.0f / iscale;
  }
}

}  // namespace braid::kernels::cpu::internal
