// K-quant weights (Q4_K, Q5_K, Q6_K) in the octet layout (RepackQuads,
// gemm_tile.h) on AVX2 (Q5_0's tile, shared with AVX-512, is in
// gemm_octets.h): eight
// rows interleaved so that one 32-byte load holds four quants of each of the
// 8 rows, and every vector lane is one row. A row's super-block sum is then
// built in its own lane (maddubs of the 8 rows' quants against 4 activation
// bytes broadcast, 8 of them summed in 16 bits, then madd by the sub-block's
// scale), and its float steps run on 8 rows at once: no horizontal sums, and
// each super-block's scales and mins are decoded once for 8 rows and every
// token of the tile.
//
// The integers are the row dot's (dot_k_avx2.cc: exact sums, only grouped
// differently) and the float steps are KQuantAccumulate's in super-block
// order, so every output is bit-identical to DotRow on the GGUF row.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm/gemm_octets.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu::internal {

namespace {

using namespace octets;  // NOLINT: the layout this file implements

// Row l's 4 quants of sub-block j, 4-byte group k, of Q4_K / Q5_K block b.
template <bool kQ5>
BRAID_AVX2_INLINE __m256i QuantsQ45K(const uint8_t* b, int j, int k) {
  constexpr size_t kQs = kQ5 ? kQuants5 : kQuants;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bits = Load(b + kQs + (j / 2) * 256 + 32 * k);
  __m256i v = j % 2 == 0 ? _mm256_and_si256(bits, low4)
                         : _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
  if constexpr (kQ5) {
    // Bit j of the fifth bits' bytes, at bit 4.
    const __m256i qh = Load(b + kQh5 + 32 * k);
    const __m256i at4 = j < 4    ? _mm256_slli_epi16(qh, 4 - j)
                        : j == 4 ? qh
                                 : _mm256_srli_epi16(qh, j - 4);
    v = _mm256_or_si256(v, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
  }
  return v;
}

// isum[t] += the scaled integer sums of Q4_K / Q5_K block b against xs[t].
template <bool kQ5, int T>
BRAID_AVX2_INLINE void SumsQ45K(const uint8_t* b, const ScalesMins8& s,
                                const BlockQ8_K* const* xs, __m256i* isum) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {  // the sub-block
    const __m256i sc = ByteAsPair(j < 4 ? s.sc_lo : s.sc_hi, j % 4);
    __m256i acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = QuantsQ45K<kQ5>(b, j, k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        int32_t x4;
        std::memcpy(&x4, xs[t]->qs + 32 * j + 4 * k, 4);
        // |sum| of 8 maddubs pairs <= 8 * 2 * 15 * 128 < 2^15 (Q5_K: of
        // 4, 4 * 2 * 31 * 128).
        acc[t] = _mm256_add_epi16(
            acc[t], _mm256_maddubs_epi16(v, _mm256_set1_epi32(x4)));
        KeepInRegister(acc[t]);
      }
      if (k == 7 || (kQ5 && k == 3)) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(acc[t], sc));
          acc[t] = _mm256_setzero_si256();
        }
      }
    }
  }
}

// Q4_K (kQ5 false) or Q5_K super-block b of 8 rows against T tokens' blocks
// xs[t]: sums[t] after it (KQuantAccumulate's two steps in every lane).
template <bool kQ5>
struct Q45K {
  static constexpr size_t kBlock = kQ5 ? kOctetBlock5 : kOctetBlock;
  template <int T>
  BRAID_AVX2_INLINE static void Add(const uint8_t* b,
                                    const BlockQ8_K* const* xs, __m256* sums) {
    const ScalesMins8 s = DecodeScalesMins(b);
    __m256i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    SumsQ45K<kQ5, T>(b, s, xs, isum);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      sums[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                                _mm256_cvtepi32_ps(isum[t]), sums[t]);
      sums[t] =
          _mm256_fnmadd_ps(RowScales(b + kDmins, xs[t]->d),
                           _mm256_cvtepi32_ps(MinsSum(s, *xs[t])), sums[t]);
    }
  }
};

// Row l's 6-bit values (0-63) of 4-byte group m of the k-th 32 of half h of
// Q6_K block b.
BRAID_AVX2_INLINE __m256i QuantsQ6K(const uint8_t* b, int h, int k, int m) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i lbits = Load(b + kQl6 + (2 * h + k % 2) * 256 + 32 * m);
  const __m256i hbits = Load(b + kQh6 + h * 256 + 32 * m);
  const __m256i low = k < 2
                          ? _mm256_and_si256(lbits, low4)
                          : _mm256_and_si256(_mm256_srli_epi16(lbits, 4), low4);
  // Bits 2k, 2k + 1 of qh at bits 4, 5.
  const __m256i top = k == 0   ? _mm256_slli_epi16(hbits, 4)
                      : k == 1 ? _mm256_slli_epi16(hbits, 2)
                      : k == 2 ? hbits
                               : _mm256_srli_epi16(hbits, 2);
  return _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
}

// isum[t] += the scaled sums of Q6_K block b's values against xs[t]: sums of
// two maddubs (each pair <= 2 * 63 * 128) fit 16 bits.
template <int T>
BRAID_AVX2_INLINE void SumsQ6K(const uint8_t* b, const BlockQ8_K* const* xs,
                               __m256i* isum) {
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {  // the sub-block of 16
    const int h = j / 8, k = (j % 8) / 2, half = j % 2;
    const __m256i sc =
        ScalePairQ6K(Load(b + kScales6 + 32 * (j / 4)), j % 4, j % 4);
#pragma GCC unroll 2
    for (int pair = 0; pair < 2; ++pair) {
      __m256i acc[T];
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        const int m = 4 * half + 2 * pair + e;  // the 4-byte group
        const __m256i u = QuantsQ6K(b, h, k, m);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          int32_t x4;
          std::memcpy(&x4, xs[t]->qs + 128 * h + 32 * k + 4 * m, 4);
          const __m256i p = _mm256_maddubs_epi16(u, _mm256_set1_epi32(x4));
          acc[t] = e == 0 ? p : _mm256_add_epi16(acc[t], p);
          KeepInRegister(acc[t]);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(acc[t], sc));
        KeepInRegister(isum[t]);
      }
    }
  }
}

// Q6_K super-block b (as Q45K::Add), the row dot's integers: the values'
// sums, less their offsets.
struct Q6K {
  static constexpr size_t kBlock = kOctetBlock6;
  template <int T>
  BRAID_AVX2_INLINE static void Add(const uint8_t* b,
                                    const BlockQ8_K* const* xs, __m256* sums) {
    __m256i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    SumsQ6K<T>(b, xs, isum);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i total = _mm256_sub_epi32(isum[t], OffsetsQ6K(b, *xs[t]));
      // KQuantAccumulate with dmin = 0: its second step adds -0.
      sums[t] = _mm256_fmadd_ps(RowScales(b + kDs, xs[t]->d),
                                _mm256_cvtepi32_ps(total), sums[t]);
    }
  }
};

// 8 rows of format F (the group at w, nb super-blocks) x T tokens of Q8_K
// activations from x (rows x_row_bytes apart): out[t * ld_y + l] for row l.
template <typename F, int T>
BRAID_AVX2 void OctetTile(const TileArgs& a) {
  __m256 sums[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < a.nb; ++i) {
    const BlockQ8_K* xs[T];
    TokenBlocks<T>(a.x, a.x_row_bytes, i, xs);
    PrefetchAhead<F::kBlock>(a.w + i * F::kBlock);
    F::template Add<T>(a.w + i * F::kBlock, xs, sums);
  }
  StoreRows<T>(sums, a.out, a.ld_y, a.accumulate);
}

}  // namespace

bool IsOctetType(DType type) {
  return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K ||
         type == DType::kQ5_0;
}

int64_t OctetBlockElements(DType type) { return FormatOf(type).elements; }

void RepackOctets(DType type, const uint8_t* w, int64_t cols, uint8_t* out,
                  int64_t g0, int64_t g1) {
  const OctetFormat f = FormatOf(type);
  const int64_t nb = cols / f.elements;
  // Row l's block as runs of bytes that stay together (mostly 4-byte
  // groups): a few dozen copies a block instead of one a byte.
  struct Run {
    uint16_t from, to, len;
  };
  std::vector<Run> runs[8];
  for (int l = 0; l < 8; ++l) {
    for (size_t b = 0; b < f.block; ++b) {
      const size_t to = f.offset(l, b);
      if (!runs[l].empty() && runs[l].back().to + runs[l].back().len == to &&
          runs[l].back().from + runs[l].back().len == b) {
        ++runs[l].back().len;
      } else {
        runs[l].push_back(
            {static_cast<uint16_t>(b), static_cast<uint16_t>(to), uint16_t{1}});
      }
    }
  }
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* o = out + (g * nb + i) * 8 * f.block;
      for (int l = 0; l < 8; ++l) {
        const uint8_t* src = w + ((8 * g + l) * nb + i) * f.block;
        for (const Run& r : runs[l]) {
          if (r.len == 4) {
            std::memcpy(o + r.to, src + r.from, 4);
          } else {
            std::memcpy(o + r.to, src + r.from, r.len);
          }
        }
      }
      if (f.to_octet != nullptr) f.to_octet(o);
    }
  }
}

void UnpackOctetRow(DType type, const uint8_t* octets, int64_t cols, int64_t r,
                    uint8_t* out) {
  const OctetFormat f = FormatOf(type);
  const int64_t nb = cols / f.elements;
  const int l = static_cast<int>(r % 8);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* o = octets + ((r / 8) * nb + i) * 8 * f.block;
    for (size_t b = 0; b < f.block; ++b)
      out[i * f.block + b] = o[f.offset(l, b)];
    if (f.to_row != nullptr) f.to_row(out + i * f.block);
  }
}

BRAID_AVX2 void GemmOctetsAvx2(DType type, const uint8_t* octets, int64_t cols,
                               const uint8_t* x, size_t x_row_bytes, int64_t r0,
                               int64_t r1, int64_t n_tok, float* y,
                               int64_t ld_y, bool accumulate) {
  if (type == DType::kQ5_0) {
    ForEachTileQ50<4>(
        octets, cols, x, x_row_bytes, r0, r1, n_tok, y, ld_y, accumulate,
        [](auto width, const TileArgs& a, Q50Tables tb)
            BRAID_AVX2 { TileQ50<decltype(width)::value, false>(a, tb); });
    return;
  }
  ForEachTile<4>(type, octets, cols, x, x_row_bytes, r0, r1, n_tok, y, ld_y,
                 accumulate,
                 [type](auto width, const TileArgs& a, int64_t) BRAID_AVX2 {
                   constexpr int kT = decltype(width)::value;
                   switch (type) {
                     case DType::kQ4_K:
                       OctetTile<Q45K<false>, kT>(a);
                       break;
                     case DType::kQ5_K:
                       OctetTile<Q45K<true>, kT>(a);
                       break;
                     default:
                       OctetTile<Q6K, kT>(a);
                   }
                   return int64_t{8};
                 });
}

}  // namespace braid::kernels::cpu::internal
