// K-quant weights (Q4_K, Q5_K, Q6_K) in the octet layout (gemm_octets.h) on
// AVX-512 with VNNI. Octets go in pairs: one 512-bit vector holds a 4-byte
// quant group of the first octet's 8 rows in its low half and of the
// second's in its high half (two 32-byte loads), so each 32-bit lane is one
// of 16 rows, and dpbusd sums the group's 4 products against the token's 4
// activation bytes, broadcast, into it directly: no 16-bit step and no
// shuffle of the activations. After a sub-block the lanes' sums are
// multiplied by their rows' scales (mullo); after a super-block each half
// takes the 8-row float steps of the AVX2 tiles. An octet left over goes
// through the same tile as both halves, one half's results dropped.
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
#include <cstring>
#include <type_traits>

#include "kernels/cpu/gemm/gemm_avx512_blocks.h"
#include "kernels/cpu/gemm/gemm_octets.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu::internal {

namespace {

using namespace octets;  // NOLINT: the layout this file implements

#define BRAID_AVX512_INLINE BRAID_AVX512 inline __attribute__((always_inline))

// Pins a running sum's order (GCC regroups the unrolled super-block's
// adds into trees otherwise, whose partial sums spill).
BRAID_AVX512_INLINE void KeepInRegister(__m512i& v) { asm("" : "+v"(v)); }

// Byte `b` of every 32-bit lane of v (unsigned scales) as the lane's
// 32-bit value.
BRAID_AVX512_INLINE __m256i ByteAsLane(__m256i v, int b) {
  const char z = static_cast<char>(0x80);
  const char b0 = static_cast<char>(b), b1 = static_cast<char>(4 + b),
             b2 = static_cast<char>(8 + b), b3 = static_cast<char>(12 + b);
  return _mm256_shuffle_epi8(
      v, _mm256_setr_epi8(b0, z, z, z, b1, z, z, z, b2, z, z, z, b3, z, z, z,
                          b0, z, z, z, b1, z, z, z, b2, z, z, z, b3, z, z, z));
}

// Q6_K's signed scale of sub-block a of one of its scale vectors (v, as
// ScalePairQ6K reads them) as every row's 32-bit value.
BRAID_AVX512_INLINE __m256i ScaleQ6K(__m256i v, int a) {
  const char z = static_cast<char>(0x80);
  auto at = [a](int q) { return static_cast<char>(4 * a + q); };
  return _mm256_srai_epi32(
      _mm256_shuffle_epi8(
          v, _mm256_setr_epi8(z, z, z, at(0), z, z, z, at(1), z, z, z, at(2), z,
                              z, z, at(3), z, z, z, at(0), z, z, z, at(1), z, z,
                              z, at(2), z, z, z, at(3))),
      24);
}

// Two octets at once (16 rows): each 512-bit vector holds a quant group of
// octet a's 8 rows in its low half and octet b's in its high half, so every
// token's 4 activation bytes of the group meet all 16 rows as one broadcast
// (no permute); the sums and float steps are the 8-row tiles' for each half.
BRAID_AVX512_INLINE __m512i Join(__m256i a, __m256i b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
BRAID_AVX512_INLINE __m512i Join(const uint8_t* a, const uint8_t* b) {
  return Join(Load(a), Load(b));
}
BRAID_AVX512_INLINE __m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// isum[t] += the scaled sums of Q4_K / Q5_K blocks a (low half) and b.
template <bool kQ5, int T>
BRAID_AVX512_INLINE void SumsQ45KPair(const uint8_t* a, const uint8_t* b,
                                      const ScalesMins8& sa,
                                      const ScalesMins8& sb,
                                      const BlockQ8_K* const* xs,
                                      __m512i* isum) {
  constexpr size_t kQs = kQ5 ? kQuants5 : kQuants;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {  // the sub-block
    const __m512i sc = Join(ByteAsLane(j < 4 ? sa.sc_lo : sa.sc_hi, j % 4),
                            ByteAsLane(j < 4 ? sb.sc_lo : sb.sc_hi, j % 4));
    __m512i acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {  // the 4-byte group
      const size_t at = kQs + (j / 2) * 256 + 32 * k;
      const __m512i bits = Join(a + at, b + at);
      __m512i v = j % 2 == 0
                      ? _mm512_and_si512(bits, low4)
                      : _mm512_and_si512(_mm512_srli_epi16(bits, 4), low4);
      if constexpr (kQ5) {
        const __m512i qh = Join(a + kQh5 + 32 * k, b + kQh5 + 32 * k);
        const __m512i at4 = j < 4    ? _mm512_slli_epi16(qh, 4 - j)
                            : j == 4 ? qh
                                     : _mm512_srli_epi16(qh, j - 4);
        v = _mm512_or_si512(v, _mm512_and_si512(at4, _mm512_set1_epi8(0x10)));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(acc[t], v,
                                     Broadcast4(xs[t]->qs + 32 * j + 4 * k));
        KeepInRegister(acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], sc));
      KeepInRegister(isum[t]);
    }
  }
}

// isum[t] += the scaled sums of Q6_K blocks a (low half) and b.
template <int T>
BRAID_AVX512_INLINE void SumsQ6KPair(const uint8_t* a, const uint8_t* b,
                                     const BlockQ8_K* const* xs,
                                     __m512i* isum) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {  // the sub-block of 16
    const int h = j / 8, k = (j % 8) / 2, half = j % 2;
    const size_t s = kScales6 + 32 * (j / 4);
    const __m512i sc =
        Join(ScaleQ6K(Load(a + s), j % 4), ScaleQ6K(Load(b + s), j % 4));
    __m512i acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int e = 0; e < 4; ++e) {
      const int m = 4 * half + e;  // the 4-byte group
      const size_t l = kQl6 + (2 * h + k % 2) * 256 + 32 * m;
      const size_t q = kQh6 + h * 256 + 32 * m;
      const __m512i lbits = Join(a + l, b + l);
      const __m512i hbits = Join(a + q, b + q);
      const __m512i low =
          k < 2 ? _mm512_and_si512(lbits, low4)
                : _mm512_and_si512(_mm512_srli_epi16(lbits, 4), low4);
      const __m512i top = k == 0   ? _mm512_slli_epi16(hbits, 4)
                          : k == 1 ? _mm512_slli_epi16(hbits, 2)
                          : k == 2 ? hbits
                                   : _mm512_srli_epi16(hbits, 2);
      const __m512i u = _mm512_or_si512(low, _mm512_and_si512(top, bits45));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(
            acc[t], u, Broadcast4(xs[t]->qs + 128 * h + 32 * k + 4 * m));
        KeepInRegister(acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], sc));
      KeepInRegister(isum[t]);
    }
  }
}

// The two octets' float steps, as Q45K::Add's and Q6K::Add's.
template <bool kQ5>
struct Q45KPair {
  static constexpr size_t kBlock = kQ5 ? kOctetBlock5 : kOctetBlock;
  template <int T>
  BRAID_AVX512_INLINE static void Add(const uint8_t* a, const uint8_t* b,
                                      const BlockQ8_K* const* xs, __m256* sa,
                                      __m256* sb) {
    const ScalesMins8 ma = DecodeScalesMins(a), mb = DecodeScalesMins(b);
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    SumsQ45KPair<kQ5, T>(a, b, ma, mb, xs, isum);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i ia = _mm512_castsi512_si256(isum[t]);
      const __m256i ib = _mm512_extracti64x4_epi64(isum[t], 1);
      sa[t] = _mm256_fmadd_ps(RowScales(a + kDs, xs[t]->d),
                              _mm256_cvtepi32_ps(ia), sa[t]);
      sa[t] = _mm256_fnmadd_ps(RowScales(a + kDmins, xs[t]->d),
                               _mm256_cvtepi32_ps(MinsSum(ma, *xs[t])), sa[t]);
      sb[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                              _mm256_cvtepi32_ps(ib), sb[t]);
      sb[t] = _mm256_fnmadd_ps(RowScales(b + kDmins, xs[t]->d),
                               _mm256_cvtepi32_ps(MinsSum(mb, *xs[t])), sb[t]);
    }
  }
};
struct Q6KPair {
  static constexpr size_t kBlock = kOctetBlock6;
  template <int T>
  BRAID_AVX512_INLINE static void Add(const uint8_t* a, const uint8_t* b,
                                      const BlockQ8_K* const* xs, __m256* sa,
                                      __m256* sb) {
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    SumsQ6KPair<T>(a, b, xs, isum);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i ta = _mm256_sub_epi32(_mm512_castsi512_si256(isum[t]),
                                          OffsetsQ6K(a, *xs[t]));
      const __m256i tb = _mm256_sub_epi32(_mm512_extracti64x4_epi64(isum[t], 1),
                                          OffsetsQ6K(b, *xs[t]));
      sa[t] = _mm256_fmadd_ps(RowScales(a + kDs, xs[t]->d),
                              _mm256_cvtepi32_ps(ta), sa[t]);
      sb[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                              _mm256_cvtepi32_ps(tb), sb[t]);
    }
  }
};

// 16 rows: the octet at w and the next (group_bytes on), as the AVX2
// OctetTile; or (single) the octet at w alone, taken as both halves.
template <typename F, int T>
BRAID_AVX512 void OctetPairTile(const TileArgs& a, bool single) {
  __m256 sa[T], sb[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sa[t] = sb[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < a.nb; ++i) {
    const BlockQ8_K* xs[T];
    TokenBlocks<T>(a.x, a.x_row_bytes, i, xs);
    F::template Add<T>(a.w + i * F::kBlock,
                       a.w + (single ? 0 : a.group_bytes) + i * F::kBlock, xs,
                       sa, sb);
  }
  StoreRows<T>(sa, a.out, a.ld_y, a.accumulate);
  if (!single) StoreRows<T>(sb, a.out + 8, a.ld_y, a.accumulate);
}

// 8 rows of format F (the group at w, nb super-blocks) x T tokens of Q8_K
// activations from x (rows x_row_bytes apart): out[t * ld_y + l] for row l.

}  // namespace

BRAID_AVX512 void GemmOctetsAvx512(DType type, const uint8_t* octets,
                                   int64_t cols, const uint8_t* x,
                                   size_t x_row_bytes, int64_t r0, int64_t r1,
                                   int64_t n_tok, float* y, int64_t ld_y,
                                   bool accumulate) {
  if (type == DType::kQ5_0) {
    // Octets one at a time, dpbusd on 256-bit vectors.
    ForEachTileQ50<8>(
        octets, cols, x, x_row_bytes, r0, r1, n_tok, y, ld_y, accumulate,
        [](auto width, const TileArgs& a, Q50Tables tb)
            BRAID_AVX512 { TileQ50<decltype(width)::value, true>(a, tb); });
    return;
  }
  ForEachTile<8>(
      type, octets, cols, x, x_row_bytes, r0, r1, n_tok, y, ld_y, accumulate,
      [type](auto width, const TileArgs& a, int64_t rows) BRAID_AVX512 {
        constexpr int kT = decltype(width)::value;
        const bool single = rows < 16;  // an octet left over
        switch (type) {
          case DType::kQ4_K:
            OctetPairTile<Q45KPair<false>, kT>(a, single);
            break;
          case DType::kQ5_K:
            OctetPairTile<Q45KPair<true>, kT>(a, single);
            break;
          default:
            OctetPairTile<Q6KPair, kT>(a, single);
        }
        return int64_t{single ? 8 : 16};
      });
}

}  // namespace braid::kernels::cpu::internal
