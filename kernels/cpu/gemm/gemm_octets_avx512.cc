// K-quant weights (Q4_K, Q5_K, Q6_K) in the octet layout (gemm_octets.h) on
// AVX-512 with VNNI. One 64-byte load holds two 4-byte quant groups of each
// of the 8 rows (group 2p in the low half, 2p + 1 in the high: the layout's
// consecutive groups), so each 32-bit lane is still one row's, and dpbusd
// sums the 4 products of a group into it directly: no 16-bit step. The
// activations meet them as the token's two groups, each repeated over its
// half (one permute). After a sub-block, the lanes' sums are multiplied by
// the rows' scale (mullo), and after a super-block the two halves are added
// and the float steps run on 8 rows as on AVX2.
//
// The integers are exact, as the AVX2 tiles' (gemm_octets_avx2.cc) and the
// row dot's are, only grouped differently, and the float steps are the same
// instructions on the same values, so every output is bit-identical to
// DotRow on the GGUF row.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/gemm/gemm_avx512_blocks.h"
#include "kernels/cpu/gemm/gemm_octets.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu::internal {

namespace {

using namespace octets;  // NOLINT: the layout this file implements

#define BRAID_AVX512_INLINE BRAID_AVX512 inline __attribute__((always_inline))

BRAID_AVX512_INLINE __m512i Load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

// A token's 32 activation bytes at p (8 groups of 4) in the low half.
BRAID_AVX512_INLINE __m512i Groups(const int8_t* p) {
  return _mm512_zextsi256_si512(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Groups 2p and 2p + 1 of x (Groups) repeated over the low and high half.
BRAID_AVX512_INLINE __m512i GroupPair(__m512i x, int p) {
  const int a = 2 * p, b = 2 * p + 1;
  return _mm512_permutexvar_epi32(
      _mm512_set_epi32(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a), x);
}

// Byte `b` of every 32-bit lane of v (unsigned scales) as the lane's
// 32-bit value, in both halves.
BRAID_AVX512_INLINE __m512i ByteAsLane(__m256i v, int b) {
  const char z = static_cast<char>(0x80);
  const char b0 = static_cast<char>(b), b1 = static_cast<char>(4 + b),
             b2 = static_cast<char>(8 + b), b3 = static_cast<char>(12 + b);
  return _mm512_broadcast_i64x4(_mm256_shuffle_epi8(
      v, _mm256_setr_epi8(b0, z, z, z, b1, z, z, z, b2, z, z, z, b3, z, z, z,
                          b0, z, z, z, b1, z, z, z, b2, z, z, z, b3, z, z,
                          z)));
}

// Q6_K's signed scale of sub-block a of one of its scale vectors (v, as
// ScalePairQ6K reads them) as every row's 32-bit value, in both halves.
BRAID_AVX512_INLINE __m512i ScaleQ6K(__m256i v, int a) {
  const char z = static_cast<char>(0x80);
  auto at = [a](int q) { return static_cast<char>(4 * a + q); };
  return _mm512_broadcast_i64x4(_mm256_srai_epi32(
      _mm256_shuffle_epi8(
          v, _mm256_setr_epi8(z, z, z, at(0), z, z, z, at(1), z, z, z, at(2),
                              z, z, z, at(3), z, z, z, at(0), z, z, z, at(1),
                              z, z, z, at(2), z, z, z, at(3))),
      24));
}

// The 8 rows' sums: the two halves' lanes added.
BRAID_AVX512_INLINE __m256i Halves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v),
                          _mm512_extracti64x4_epi64(v, 1));
}

// isum[t] += the scaled integer sums of Q4_K / Q5_K block b against xs[t].
template <bool kQ5, int T>
BRAID_AVX512_INLINE void SumsQ45K(const uint8_t* b, const ScalesMins8& s,
                                  const BlockQ8_K* const* xs, __m512i* isum) {
  constexpr size_t kQs = kQ5 ? kQuants5 : kQuants;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {  // the sub-block
    const __m512i sc = ByteAsLane(j < 4 ? s.sc_lo : s.sc_hi, j % 4);
    __m512i x[T], acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      x[t] = Groups(xs[t]->qs + 32 * j);
      acc[t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {  // groups 2p, 2p + 1
      const __m512i bits = Load512(b + kQs + (j / 2) * 256 + 64 * p);
      __m512i v = j % 2 == 0
                      ? _mm512_and_si512(bits, low4)
                      : _mm512_and_si512(_mm512_srli_epi16(bits, 4), low4);
      if constexpr (kQ5) {
        // Bit j of the fifth bits' bytes, at bit 4.
        const __m512i qh = Load512(b + kQh5 + 64 * p);
        const __m512i at4 = j < 4    ? _mm512_slli_epi16(qh, 4 - j)
                            : j == 4 ? qh
                                     : _mm512_srli_epi16(qh, j - 4);
        v = _mm512_or_si512(v,
                            _mm512_and_si512(at4, _mm512_set1_epi8(0x10)));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(acc[t], v, GroupPair(x[t], p));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], sc));
    }
  }
}

// Q4_K (kQ5 false) or Q5_K super-block b of 8 rows against T tokens' blocks
// xs[t]: sums[t] after it (KQuantAccumulate's two steps in every lane).
template <bool kQ5>
struct Q45K {
  static constexpr size_t kBlock = kQ5 ? kOctetBlock5 : kOctetBlock;
  template <int T>
  BRAID_AVX512_INLINE static void Add(const uint8_t* b,
                                      const BlockQ8_K* const* xs,
                                      __m256* sums) {
    const ScalesMins8 s = DecodeScalesMins(b);
    __m512i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    SumsQ45K<kQ5, T>(b, s, xs, isum);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      sums[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                                _mm256_cvtepi32_ps(Halves(isum[t])), sums[t]);
      sums[t] =
          _mm256_fnmadd_ps(RowScales(b + kDmins, xs[t]->d),
                           _mm256_cvtepi32_ps(MinsSum(s, *xs[t])), sums[t]);
    }
  }
};

// isum[t] += the scaled sums of Q6_K block b's values (0-63) against xs[t].
template <int T>
BRAID_AVX512_INLINE void SumsQ6K(const uint8_t* b, const BlockQ8_K* const* xs,
                                 __m512i* isum) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {  // the sub-block of 16
    const int h = j / 8, k = (j % 8) / 2, half = j % 2;
    const __m512i sc = ScaleQ6K(Load(b + kScales6 + 32 * (j / 4)), j % 4);
    __m512i x[T], acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      x[t] = Groups(xs[t]->qs + 128 * h + 32 * k);
      acc[t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int pair = 0; pair < 2; ++pair) {
      const int m = 4 * half + 2 * pair;  // groups m, m + 1
      const __m512i lbits = Load512(b + kQl6 + (2 * h + k % 2) * 256 + 32 * m);
      const __m512i hbits = Load512(b + kQh6 + h * 256 + 32 * m);
      const __m512i low =
          k < 2 ? _mm512_and_si512(lbits, low4)
                : _mm512_and_si512(_mm512_srli_epi16(lbits, 4), low4);
      // Bits 2k, 2k + 1 of qh at bits 4, 5.
      const __m512i top = k == 0   ? _mm512_slli_epi16(hbits, 4)
                          : k == 1 ? _mm512_slli_epi16(hbits, 2)
                          : k == 2 ? hbits
                                   : _mm512_srli_epi16(hbits, 2);
      const __m512i u = _mm512_or_si512(low, _mm512_and_si512(top, bits45));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(acc[t], u, GroupPair(x[t], m / 2));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], sc));
    }
  }
}

// Q6_K super-block b (as Q45K::Add), the row dot's integers: the values'
// sums, less their offsets.
struct Q6K {
  static constexpr size_t kBlock = kOctetBlock6;
  template <int T>
  BRAID_AVX512_INLINE static void Add(const uint8_t* b,
                                      const BlockQ8_K* const* xs,
                                      __m256* sums) {
    __m512i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    SumsQ6K<T>(b, xs, isum);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i total =
          _mm256_sub_epi32(Halves(isum[t]), OffsetsQ6K(b, *xs[t]));
      // KQuantAccumulate with dmin = 0: its second step adds -0.
      sums[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                                _mm256_cvtepi32_ps(total), sums[t]);
    }
  }
};

// 8 rows of format F (the group at w, nb super-blocks) x T tokens of Q8_K
// activations from x (rows x_row_bytes apart): out[t * ld_y + l] for row l.
template <typename F, int T>
BRAID_AVX512 void OctetTile(const uint8_t* w, int64_t nb, const uint8_t* x,
                            size_t x_row_bytes, float* out, int64_t ld_y,
                            bool accumulate) {
  __m256 sums[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* xs[T];
    TokenBlocks<T>(x, x_row_bytes, i, xs);
    F::template Add<T>(w + i * F::kBlock, xs, sums);
  }
  StoreRows<T>(sums, out, ld_y, accumulate);
}

}  // namespace

BRAID_AVX512 void GemmOctetsAvx512(DType type, const uint8_t* octets,
                                   int64_t cols, const uint8_t* x,
                                   size_t x_row_bytes, int64_t r0, int64_t r1,
                                   int64_t n_tok, float* y, int64_t ld_y,
                                   bool accumulate) {
  const int64_t nb = cols / kQK_K;
  const size_t group_bytes = nb * 8 * FormatOf(type).block;
  // Tokens in groups of 4 (then 2, 1), each group over the range's rows:
  // the group's activations stay in L1, the rows stream from L2.
  auto groups = [&](auto width, int64_t* t0) BRAID_AVX512 {
    constexpr int kT = decltype(width)::value;
    for (; *t0 + kT <= n_tok; *t0 += kT) {
      for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t* g = octets + (r / 8) * group_bytes;
        const uint8_t* xt = x + *t0 * x_row_bytes;
        float* out = y + *t0 * ld_y + r;
        switch (type) {
          case DType::kQ4_K:
            OctetTile<Q45K<false>, kT>(g, nb, xt, x_row_bytes, out, ld_y,
                                       accumulate);
            break;
          case DType::kQ5_K:
            OctetTile<Q45K<true>, kT>(g, nb, xt, x_row_bytes, out, ld_y,
                                      accumulate);
            break;
          default:
            OctetTile<Q6K, kT>(g, nb, xt, x_row_bytes, out, ld_y, accumulate);
        }
      }
    }
  };
  int64_t t0 = 0;
  groups(std::integral_constant<int, 4>{}, &t0);
  groups(std::integral_constant<int, 2>{}, &t0);
  groups(std::integral_constant<int, 1>{}, &t0);
}

}  // namespace braid::kernels::cpu::internal
