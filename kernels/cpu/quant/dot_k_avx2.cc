// AVX2 dots and GEMM of the K-quant weight types (dot_k.cc has the scalar
// path and the arithmetic both follow). Unsigned weight values times
// signed Q8 activations go through maddubs (pairs of at most 2 * 63 * 127, no
// saturation), then madd by the sub-block scales into 32-bit lanes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/quant/dot.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {
namespace {

// Bits [shift, shift + width) of each byte of v, at the byte's bottom.
BRAID_AVX2 inline __m256i ByteBits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(mask));
}

}  // namespace

namespace {

// What one K-quant weight block contributes to its dots with any Q8_K
// block x, in the integers of dot_k.cc:
//   isum = sum_c madd(maddubs(u[c], x.qs[32c..]), sv[c]) + coef . x.bsums
//   msum = mcoef . x.bsums
// u[c]: the unsigned values of elements 32c..32c+31; sv[c]: their scales as
// 16 int16 (the first 8 for elements 32c..32c+15); coef / mcoef: 16 int16,
// one per bsum (Q3_K's and Q6_K's offsets times the scale, the mins).
struct KPrep {
  __m256i u[8];
  __m256i sv[8];
  __m256i coef, mcoef;
  float d, dmin;
};

BRAID_AVX2 inline __m256i PairScales(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)),
                          _mm_set1_epi16(static_cast<int16_t>(a)));
}

BRAID_AVX2 inline __m256i Int16x16(const int16_t* v) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v));
}

BRAID_AVX2 void Prepare(const BlockQ2_K& b, KPrep* p) {
  alignas(32) int16_t m[16];
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = Load256(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const int s = 8 * h + 2 * j;
      p->u[4 * h + j] = ByteBits(bits, 2 * j, 3);
      p->sv[4 * h + j] = PairScales(b.scales[s] & 0xF, b.scales[s + 1] & 0xF);
    }
  }
  for (int s = 0; s < 16; ++s) m[s] = b.scales[s] >> 4;
  p->coef = _mm256_setzero_si256();
  p->mcoef = Int16x16(m);
  p->d = H2F(b.d);
  p->dmin = H2F(b.dmin);
}

BRAID_AVX2 void Prepare(const BlockQ3_K& b, KPrep* p) {
  alignas(32) int16_t coef[16];
  int sc[16];
  for (int s = 0; s < 16; ++s) {
    sc[s] = ScaleQ3K(s, b.scales);
    coef[s] = static_cast<int16_t>(-4 * sc[s]);
  }
  const __m256i hmask = Load256(b.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = Load256(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const int s = 8 * h + 2 * j;
      p->u[4 * h + j] =
          _mm256_or_si256(ByteBits(bits, 2 * j, 3),
                          _mm256_slli_epi16(ByteBits(hmask, 4 * h + j, 1), 2));
      p->sv[4 * h + j] = PairScales(sc[s], sc[s + 1]);
    }
  }
  p->coef = Int16x16(coef);
  p->mcoef = _mm256_setzero_si256();
  p->d = H2F(b.d);
  p->dmin = 0.0f;
}

// sum after one more block: KQuantAccumulate over the block's integers.
BRAID_AVX2 inline float AddBlock(const KPrep& p, const BlockQ8_K& x,
                                 float sum) {
  const __m256i bsums = Int16x16(x.bsums);
  __m256i acc = _mm256_madd_epi16(p.coef, bsums);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    acc = _mm256_add_epi32(
        acc,
        _mm256_madd_epi16(_mm256_maddubs_epi16(p.u[c], Load256(x.qs + 32 * c)),
                          p.sv[c]));
  }
  const int msum = HorizontalSumI32(_mm256_madd_epi16(p.mcoef, bsums));
  return KQuantAccumulate(sum, p.d * x.d, p.dmin * x.d, HorizontalSumI32(acc),
                          msum);
}

// One block's sums against T tokens' Q8_K blocks xs[t], into sums[t]: by
// default the block prepared once (Prepare) and each token added from it
// (AddBlock); Q4_K, Q5_K and Q6_K (the bulk of Q4_K_M / Q5_K_M files) have
// forms below that keep every vector in registers (the same integers, so the
// same sums).
template <int T, typename Block>
BRAID_AVX2 inline void BlockSums(const Block& b, const BlockQ8_K* const* xs,
                                 float* sums) {
  KPrep p;
  Prepare(b, &p);
  for (int t = 0; t < T; ++t) sums[t] = AddBlock(p, *xs[t], sums[t]);
}

// Q4_K's 8 scales (bytes 0-7) and 8 mins (bytes 8-15) from its 12 bytes of
// 6-bit fields, four at a time (ScaleMinK4's values).
inline __m128i ScalesMinsQ4K(const uint8_t* q) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kTop2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, q, 12);
  const uint32_t scales_hi = (u[2] & kLow4) | (((u[0] >> 6) & kTop2) << 4);
  const uint32_t mins_hi = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kTop2) << 4);
  return _mm_set_epi32(
      static_cast<int>(mins_hi), static_cast<int>(u[1] & kLow6),
      static_cast<int>(scales_hi), static_cast<int>(u[0] & kLow6));
}

// Q4_K (and below Q6_K) against T tokens' blocks xs[t] at once: the weight
// block unpacked and its scales decoded once, each token's sums as
// BlockSum's (the same integers and float steps).
template <int T, typename Block>
BRAID_AVX2 inline void BlockSumsQ45K(const Block& b, const BlockQ8_K* const* xs,
                                     float* sums) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i scales_mins = _mm256_cvtepu8_epi16(ScalesMinsQ4K(b.scales));
  const __m256i scales = _mm256_permute2x128_si256(scales_mins, scales_mins, 0);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kQ5) qh = Load256(b.qh);
  __m256i acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m256i sc_lo = _mm256_shuffle_epi8(
        scales,
        _mm256_set1_epi16(static_cast<int16_t>((4 * g) | ((4 * g + 1) << 8))));
    const __m256i sc_hi = _mm256_shuffle_epi8(
        scales, _mm256_set1_epi16(
                    static_cast<int16_t>((4 * g + 2) | ((4 * g + 3) << 8))));
    const __m256i bits = Load256(b.qs + 32 * g);
    __m256i lo = _mm256_and_si256(bits, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
    if constexpr (kQ5) {
      // Fifth bits: bit 2g (low nibbles) and 2g + 1 (high) of qh's bytes.
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi16(
                  _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), one), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi16(
                  _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g + 1), one), 4));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i plo = _mm256_madd_epi16(
          _mm256_maddubs_epi16(lo, Load256(xs[t]->qs + 64 * g)), sc_lo);
      const __m256i phi = _mm256_madd_epi16(
          _mm256_maddubs_epi16(hi, Load256(xs[t]->qs + 64 * g + 32)), sc_hi);
      acc[t] = _mm256_add_epi32(acc[t], _mm256_add_epi32(plo, phi));
    }
  }
  const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
  const float d = H2F(b.d), dmin = H2F(b.dmin);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i bsums = Int16x16(xs[t]->bsums);
    const __m128i pair_sums = _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    __m128i ms = _mm_madd_epi16(mins, pair_sums);
    ms = _mm_add_epi32(ms, _mm_unpackhi_epi64(ms, ms));
    ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, 1));
    sums[t] = KQuantAccumulate(sums[t], d * xs[t]->d, dmin * xs[t]->d,
                               HorizontalSumI32(acc[t]), _mm_cvtsi128_si32(ms));
  }
}

template <int T>
BRAID_AVX2 inline void BlockSums(const BlockQ4_K& b, const BlockQ8_K* const* xs,
                                 float* sums) {
  BlockSumsQ45K<T>(b, xs, sums);
}
template <int T>
BRAID_AVX2 inline void BlockSums(const BlockQ5_K& b, const BlockQ8_K* const* xs,
                                 float* sums) {
  BlockSumsQ45K<T>(b, xs, sums);
}

// Whether Block has a register form above (worth groups of 4 tokens); the
// others prepare a block in memory and amortize that over up to 16.
template <typename Block>
constexpr bool kRegisterForm =
    std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K> ||
    std::is_same_v<Block, BlockQ6_K>;

// Q6_K against T tokens' blocks xs[t] at once (BlockSum's integers and
// float steps for each).
template <int T>
BRAID_AVX2 inline void BlockSums(const BlockQ6_K& b, const BlockQ8_K* const* xs,
                                 float* sums) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i sc16 = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  __m256i acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i half = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                : _mm256_permute2x128_si256(sc16, sc16, 0x11);
    const __m256i ql0 = Load256(b.ql + 64 * h);
    const __m256i ql1 = Load256(b.ql + 64 * h + 32);
    const __m256i qh = Load256(b.qh + 32 * h);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i ql = k % 2 == 0 ? ql0 : ql1;
      const __m256i low =
          k < 2 ? _mm256_and_si256(ql, low4)
                : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
      const __m256i u = _mm256_or_si256(
          low, _mm256_slli_epi16(
                   _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three), 4));
      const int a = 2 * k, c = 2 * k + 1;
      const __m256i sv = _mm256_shuffle_epi8(
          half, _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(
                                     (2 * c) | ((2 * c + 1) << 8))),
                                 _mm_set1_epi16(static_cast<int16_t>(
                                     (2 * a) | ((2 * a + 1) << 8)))));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm256_add_epi32(
            acc[t],
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(u, Load256(xs[t]->qs + 128 * h + 32 * k)),
                sv));
      }
    }
  }
  const float d = H2F(b.d);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i corr = _mm256_madd_epi16(sc16, Int16x16(xs[t]->bsums));
    sums[t] = KQuantAccumulate(
        sums[t], d * xs[t]->d, 0.0f,
        HorizontalSumI32(acc[t]) - 32 * HorizontalSumI32(corr), 0);
  }
}

// Rows [r0, r1) x tokens [t0, t0 + T): y as GemmK writes it.
template <typename Block, int T>
BRAID_AVX2 void RowsK(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, int64_t nb, int64_t r0, int64_t r1,
                      int64_t t0, float* y, int64_t ld_y, bool accumulate) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wr = reinterpret_cast<const Block*>(w + r * w_row_bytes);
    float sums[T] = {};
    const BlockQ8_K* xs[T];
    for (int64_t i = 0; i < nb; ++i) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        xs[t] =
            reinterpret_cast<const BlockQ8_K*>(x + (t0 + t) * x_row_bytes) + i;
      }
      BlockSums<T>(wr[i], xs, sums);
    }
    for (int t = 0; t < T; ++t) {
      float& out = y[(t0 + t) * ld_y + r];
      out = accumulate ? out + sums[t] : sums[t];
    }
  }
}

template <typename Block>
BRAID_AVX2 float DotK(const Block* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ8_K* xs[1] = {x + i};
    BlockSums<1>(w[i], xs, &sum);
  }
  return sum;
}

// Rows [r0, r1) x tokens [0, n_tok): tokens in groups (kGroup, then 4, 2,
// 1), each group over the rows streaming: the run of rows stays in L2
// across the groups, and a row's block is unpacked once a group.
template <typename Block>
BRAID_AVX2 void GemmK(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
                      int64_t n_tok, float* y, int64_t ld_y, bool accumulate) {
  constexpr int kGroup = kRegisterForm<Block> ? 4 : 16;
  const int64_t nb = n / kQK_K;
  int64_t t0 = 0;
  auto groups = [&](auto width) BRAID_AVX2 {
    constexpr int kT = decltype(width)::value;
    for (; t0 + kT <= n_tok; t0 += kT) {
      RowsK<Block, kT>(w, w_row_bytes, x, x_row_bytes, nb, r0, r1, t0, y, ld_y,
                       accumulate);
    }
  };
  groups(std::integral_constant<int, kGroup>{});
  if constexpr (kGroup > 4) groups(std::integral_constant<int, 4>{});
  groups(std::integral_constant<int, 2>{});
  groups(std::integral_constant<int, 1>{});
}

}  // namespace

BRAID_AVX2 float DotQ2_KQ8_KAvx2(const BlockQ2_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotK(w, x, n);
}
BRAID_AVX2 float DotQ3_KQ8_KAvx2(const BlockQ3_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotK(w, x, n);
}
BRAID_AVX2 float DotQ4_KQ8_KAvx2(const BlockQ4_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotK(w, x, n);
}
BRAID_AVX2 float DotQ5_KQ8_KAvx2(const BlockQ5_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotK(w, x, n);
}
BRAID_AVX2 float DotQ6_KQ8_KAvx2(const BlockQ6_K* w, const BlockQ8_K* x,
                                 int64_t n) {
  return DotK(w, x, n);
}

bool GemmKQuantAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate) {
  switch (type) {
    case DType::kQ2_K:
      GemmK<BlockQ2_K>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                       ld_y, accumulate);
      return true;
    case DType::kQ3_K:
      GemmK<BlockQ3_K>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                       ld_y, accumulate);
      return true;
    case DType::kQ4_K:
      GemmK<BlockQ4_K>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                       ld_y, accumulate);
      return true;
    case DType::kQ5_K:
      GemmK<BlockQ5_K>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                       ld_y, accumulate);
      return true;
    case DType::kQ6_K:
      GemmK<BlockQ6_K>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                       ld_y, accumulate);
      return true;
    default:
      return false;
  }
}

}  // namespace braid::kernels::cpu::internal
