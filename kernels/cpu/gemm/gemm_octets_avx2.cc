// K-quant weights (Q4_K, Q5_K, Q6_K) in the octet layout (RepackQuads,
// gemm_tile.h) on AVX2: eight
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

#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/quant/quant.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {

namespace {

// Q4_K: one super-block of 8 rows is their d, their dmin, their 12 scale
// bytes as three 32-bit words (word w of row l at kWords + (8 * w + l) * 4),
// then the quants: row l's qs[32 * g + 4 * k .. + 3] at kQuants + ((8 * g +
// k) * 8 + l) * 4 (g = the pair of sub-blocks 2g, 2g + 1 in its low and high
// nibbles, k = the 4-byte group within it).
constexpr size_t kDs = 0, kDmins = 16, kWords = 32, kQuants = 128;
constexpr size_t kOctetBlock = kQuants + 8 * kQK_K / 2;
static_assert(kOctetBlock == 8 * sizeof(BlockQ4_K), "same bytes as 8 rows");

// Q5_K: as Q4_K, with the fifth bits between the scale words and the
// quants: row l's qh[4 * k .. + 3] at kQh5 + (8 * k + l) * 4.
constexpr size_t kQh5 = kQuants, kQuants5 = kQh5 + 8 * kQK_K / 8;
constexpr size_t kOctetBlock5 = kQuants5 + 8 * kQK_K / 2;
static_assert(kOctetBlock5 == 8 * sizeof(BlockQ5_K), "same bytes as 8 rows");

// Q6_K: their d, their 16 scales (4 vectors of 4 sub-blocks each: rows 0-3
// in the low 128 bits, 4-7 in the high, so a shuffle within each half picks
// one sub-block's scale for every row's lane), then ql: row l's ql[64 * h +
// 32 * p + 4 * m .. + 3] at kQl6 + (((2 * h + p) * 8 + m) * 8 + l) * 4, then
// qh: row l's qh[32 * h + 4 * m .. + 3] at kQh6 + ((8 * h + m) * 8 + l) * 4.
constexpr size_t kScales6 = 16, kQl6 = 144, kQh6 = kQl6 + 8 * kQK_K / 2;
constexpr size_t kOctetBlock6 = kQh6 + 8 * kQK_K / 4;
static_assert(kOctetBlock6 == 8 * sizeof(BlockQ6_K), "same bytes as 8 rows");

// Where byte b of row l's block goes in its octet block.
size_t OctetOffsetQ4K(int l, size_t b) {
  if (b < 2) return kDs + 2 * l + b;
  if (b < 4) return kDmins + 2 * l + (b - 2);
  if (b < 16) return kWords + (8 * ((b - 4) / 4) + l) * 4 + (b - 4) % 4;
  const size_t c = b - 16;
  return kQuants + ((8 * (c / 32) + (c % 32) / 4) * 8 + l) * 4 + c % 4;
}
size_t OctetOffsetQ5K(int l, size_t b) {
  if (b < 16) return OctetOffsetQ4K(l, b);
  if (b < 48) return kQh5 + (8 * ((b - 16) / 4) + l) * 4 + (b - 16) % 4;
  const size_t c = b - 48;
  return kQuants5 + ((8 * (c / 32) + (c % 32) / 4) * 8 + l) * 4 + c % 4;
}
size_t OctetOffsetQ6K(int l, size_t b) {
  if (b < 128) {  // ql
    return kQl6 +
           (((2 * (b / 64) + (b % 64) / 32) * 8 + (b % 32) / 4) * 8 + l) * 4 +
           b % 4;
  }
  if (b < 192) {  // qh
    const size_t c = b - 128;
    return kQh6 + ((8 * (c / 32) + (c % 32) / 4) * 8 + l) * 4 + c % 4;
  }
  if (b < 208) {  // scales
    const size_t j = b - 192;
    return kScales6 + 32 * (j / 4) + 16 * (l / 4) + 4 * (j % 4) + l % 4;
  }
  return kDs + 2 * l + (b - 208);  // d
}

// The octet layout of a type: its GGUF block's bytes and where they go.
struct OctetFormat {
  size_t block;  // bytes of one row's super-block
  size_t (*offset)(int l, size_t b);
};
OctetFormat FormatOf(DType type) {
  switch (type) {
    case DType::kQ4_K:
      return {sizeof(BlockQ4_K), OctetOffsetQ4K};
    case DType::kQ5_K:
      return {sizeof(BlockQ5_K), OctetOffsetQ5K};
    default:
      return {sizeof(BlockQ6_K), OctetOffsetQ6K};
  }
}

BRAID_AVX2 inline __m256i Load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Byte `b` of every 32-bit lane of v as the lane's two 16-bit halves.
BRAID_AVX2 inline __m256i ByteAsPair(__m256i v, int b) {
  const char z = static_cast<char>(0x80);
  const char b0 = static_cast<char>(b), b1 = static_cast<char>(4 + b),
             b2 = static_cast<char>(8 + b), b3 = static_cast<char>(12 + b);
  return _mm256_shuffle_epi8(
      v,
      _mm256_setr_epi8(b0, z, b0, z, b1, z, b1, z, b2, z, b2, z, b3, z, b3, z,
                       b0, z, b0, z, b1, z, b1, z, b2, z, b2, z, b3, z, b3, z));
}

// Bytes `a` and `b` of every 32-bit lane of v as the lane's 16-bit halves.
BRAID_AVX2 inline __m256i BytesAsPair(__m256i v, int a, int b) {
  const char z = static_cast<char>(0x80);
  const char a0 = static_cast<char>(a), a1 = static_cast<char>(4 + a),
             a2 = static_cast<char>(8 + a), a3 = static_cast<char>(12 + a);
  const char b0 = static_cast<char>(b), b1 = static_cast<char>(4 + b),
             b2 = static_cast<char>(8 + b), b3 = static_cast<char>(12 + b);
  return _mm256_shuffle_epi8(
      v,
      _mm256_setr_epi8(a0, z, b0, z, a1, z, b1, z, a2, z, b2, z, a3, z, b3, z,
                       a0, z, b0, z, a1, z, b1, z, a2, z, b2, z, a3, z, b3, z));
}

// Helpers of the tiles, inlined into them (their vectors stay in registers).
#define BRAID_AVX2_INLINE BRAID_AVX2 inline __attribute__((always_inline))

// Super-block i of T tokens' Q8_K rows from x.
template <int T>
BRAID_AVX2_INLINE void TokenBlocks(const uint8_t* x, size_t x_row_bytes,
                                   int64_t i, const BlockQ8_K** xs) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    xs[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes) + i;
  }
}

// The 8 rows' f16 values at p (their d or dmin) times each token's d.
BRAID_AVX2_INLINE __m256 RowScales(const uint8_t* p, float xd) {
  return _mm256_mul_ps(
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
      _mm256_set1_ps(xd));
}

// out[t * ld_y + l] (= or +=) for row l's lane of sums[t].
template <int T>
BRAID_AVX2_INLINE void StoreRows(__m256* sums, float* out, int64_t ld_y,
                                 bool accumulate) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    float* o = out + t * ld_y;
    if (accumulate) sums[t] = _mm256_add_ps(_mm256_loadu_ps(o), sums[t]);
    _mm256_storeu_ps(o, sums[t]);
  }
}

// ScalesMinsQ4K's fields for the 8 rows' lanes: bytes 0-3 of each lane are
// that row's scales 0-3 (lo) or 4-7 (hi), likewise its mins.
struct ScalesMins8 {
  __m256i sc_lo, sc_hi, m_lo, m_hi;
};
BRAID_AVX2_INLINE ScalesMins8 DecodeScalesMins(const uint8_t* b) {
  const __m256i low6 = _mm256_set1_epi32(0x3f3f3f3f);
  const __m256i low4 = _mm256_set1_epi32(0x0f0f0f0f);
  const __m256i top2 = _mm256_set1_epi32(0x03030303);
  const __m256i u0 = Load(b + kWords), u1 = Load(b + kWords + 32),
                u2 = Load(b + kWords + 64);
  auto high = [&](__m256i low_nibbles, __m256i top_bits) BRAID_AVX2 {
    return _mm256_or_si256(
        _mm256_and_si256(low_nibbles, low4),
        _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srli_epi32(top_bits, 6), top2), 4));
  };
  return {_mm256_and_si256(u0, low6), high(u2, u0), _mm256_and_si256(u1, low6),
          high(_mm256_srli_epi32(u2, 4), u1)};
}

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

// The mins' sum of the 8 rows against one token: m_j times the sub-block's
// activation sum, in pairs of sub-blocks.
BRAID_AVX2_INLINE __m256i MinsSum(const ScalesMins8& s, const BlockQ8_K& x) {
  const __m256i bs =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  alignas(16) int32_t pair_sums[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(pair_sums),
                  _mm_hadd_epi16(_mm256_castsi256_si128(bs),
                                 _mm256_extracti128_si256(bs, 1)));
  __m256i msum = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m256i m =
        BytesAsPair(p < 2 ? s.m_lo : s.m_hi, (2 * p) % 4, (2 * p + 1) % 4);
    msum = _mm256_add_epi32(
        msum, _mm256_madd_epi16(m, _mm256_set1_epi32(pair_sums[p])));
  }
  return msum;
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

// Sub-block scales of Q6_K as 16-bit pairs, from one of its 4 scale
// vectors (kScales6): (s_a, s_b) in every row's lane, sign-extended.
BRAID_AVX2 inline __m256i ScalePairQ6K(__m256i v, int a, int b) {
  const char z = static_cast<char>(0x80);
  auto at = [](int s, int q) { return static_cast<char>(4 * s + q); };
  return _mm256_srai_epi16(
      _mm256_shuffle_epi8(
          v,
          _mm256_setr_epi8(z, at(a, 0), z, at(b, 0), z, at(a, 1), z, at(b, 1),
                           z, at(a, 2), z, at(b, 2), z, at(a, 3), z, at(b, 3),
                           z, at(a, 0), z, at(b, 0), z, at(a, 1), z, at(b, 1),
                           z, at(a, 2), z, at(b, 2), z, at(a, 3), z, at(b, 3))),
      8);
}

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
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(acc[t], sc));
      }
    }
  }
}

// The -32 of every value of block b against one token: its scales times the
// activations' 16-element sums.
BRAID_AVX2_INLINE __m256i OffsetsQ6K(const uint8_t* b, const BlockQ8_K& x) {
  alignas(32) int32_t pair_sums[8];
  std::memcpy(pair_sums, x.bsums, 32);
  __m256i corr = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    const __m256i sc2 = ScalePairQ6K(Load(b + kScales6 + 32 * (p / 2)),
                                     (2 * p) % 4, (2 * p + 1) % 4);
    corr = _mm256_add_epi32(
        corr, _mm256_madd_epi16(sc2, _mm256_set1_epi32(pair_sums[p])));
  }
  return _mm256_slli_epi32(corr, 5);
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
BRAID_AVX2 void OctetTile(const uint8_t* w, int64_t nb, const uint8_t* x,
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

bool IsOctetType(DType type) {
  return type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K;
}

void RepackOctets(DType type, const uint8_t* w, int64_t cols, uint8_t* out,
                  int64_t g0, int64_t g1) {
  const OctetFormat f = FormatOf(type);
  const int64_t nb = cols / kQK_K;
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
    }
  }
}

void UnpackOctetRow(DType type, const uint8_t* octets, int64_t cols, int64_t r,
                    uint8_t* out) {
  const OctetFormat f = FormatOf(type);
  const int64_t nb = cols / kQK_K;
  const int l = static_cast<int>(r % 8);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* o = octets + ((r / 8) * nb + i) * 8 * f.block;
    for (size_t b = 0; b < f.block; ++b)
      out[i * f.block + b] = o[f.offset(l, b)];
  }
}

BRAID_AVX2 void GemmOctetsAvx2(DType type, const uint8_t* octets, int64_t cols,
                               const uint8_t* x, size_t x_row_bytes, int64_t r0,
                               int64_t r1, int64_t n_tok, float* y,
                               int64_t ld_y, bool accumulate) {
  const int64_t nb = cols / kQK_K;
  const size_t group_bytes = nb * 8 * FormatOf(type).block;
  // Tokens in groups of 4 (then 2, 1), each group over the range's rows:
  // the group's activations stay in L1, the rows stream from L2.
  auto groups = [&](auto width, int64_t* t0) BRAID_AVX2 {
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
