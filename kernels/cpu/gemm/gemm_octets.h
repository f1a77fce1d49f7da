// The octet layout of Q4_K, Q5_K, Q6_K and Q5_0 weights (RepackQuads,
// gemm_tile.h): eight rows interleaved so that one 32-byte load holds four
// quants of each of the 8 rows, and every 32-bit vector lane is one row.
// Its byte places and the 256-bit steps the AVX2 and AVX-512 tiles share
// (gemm_octets_avx2.cc, gemm_octets_avx512.cc): the scales and mins of 8
// rows, the mins' and Q6_K offsets' sums, the float steps, and Q5_0's whole
// tile. Internal to kernels/cpu.
#ifndef BRAID_KERNELS_CPU_GEMM_GEMM_OCTETS_H_
#define BRAID_KERNELS_CPU_GEMM_GEMM_OCTETS_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/quant/quant.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))
// Helpers of the tiles, inlined into them (their vectors stay in registers).
#define BRAID_AVX2_INLINE BRAID_AVX2 inline __attribute__((always_inline))

namespace braid::kernels::cpu::internal::octets {

// Q4_K: one super-block of 8 rows is their d, their dmin, their 12 scale
// bytes as three 32-bit words (word w of row l at kWords + (8 * w + l) * 4),
// then the quants: row l's qs[32 * g + 4 * k .. + 3] at kQuants + ((8 * g +
// k) * 8 + l) * 4 (g = the pair of sub-blocks 2g, 2g + 1 in its low and high
// nibbles, k = the 4-byte group within it).
inline constexpr size_t kDs = 0, kDmins = 16, kWords = 32, kQuants = 128;
inline constexpr size_t kOctetBlock = kQuants + 8 * kQK_K / 2;
static_assert(kOctetBlock == 8 * sizeof(BlockQ4_K), "same bytes as 8 rows");

// Q5_K: as Q4_K, with the fifth bits between the scale words and the
// quants: row l's qh[4 * k .. + 3] at kQh5 + (8 * k + l) * 4.
inline constexpr size_t kQh5 = kQuants, kQuants5 = kQh5 + 8 * kQK_K / 8;
inline constexpr size_t kOctetBlock5 = kQuants5 + 8 * kQK_K / 2;
static_assert(kOctetBlock5 == 8 * sizeof(BlockQ5_K), "same bytes as 8 rows");

// Q6_K: their d, their 16 scales (4 vectors of 4 sub-blocks each: rows 0-3
// in the low 128 bits, 4-7 in the high, so a shuffle within each half picks
// one sub-block's scale for every row's lane), then ql: row l's ql[64 * h +
// 32 * p + 4 * m .. + 3] at kQl6 + (((2 * h + p) * 8 + m) * 8 + l) * 4, then
// qh: row l's qh[32 * h + 4 * m .. + 3] at kQh6 + ((8 * h + m) * 8 + l) * 4.
inline constexpr size_t kScales6 = 16, kQl6 = 144, kQh6 = kQl6 + 8 * kQK_K / 2;
inline constexpr size_t kOctetBlock6 = kQh6 + 8 * kQK_K / 4;
static_assert(kOctetBlock6 == 8 * sizeof(BlockQ6_K), "same bytes as 8 rows");

// Q5_0: their d, their fifth bits as one 32-bit word a row (row l's at
// kQh50 + 4 * l, its bits reordered: FifthBitsToOctet), then the quants:
// row l's qs[4 * k .. + 3] at kQs50 + (8 * k + l) * 4. Group p of a block's
// values (elements 4p .. 4p + 3) is then the low (p < 4) or high nibbles
// of quant vector p % 4, with bits p, 8 + p, 16 + p and 24 + p of the word.
inline constexpr size_t kQh50 = 16, kQs50 = 48;
inline constexpr size_t kOctetBlock50 = kQs50 + 8 * kQK / 2;
static_assert(kOctetBlock50 == 8 * sizeof(BlockQ5_0), "same bytes as 8 rows");

// Q5_0's fifth bits (bit e: element e's) in the octet's order: bit 8b + p
// is element 4p + b's; and back.
inline uint32_t FifthBitsToOctet(uint32_t qh) {
  uint32_t o = 0;
  for (int p = 0; p < 8; ++p) {
    for (int b = 0; b < 4; ++b) o |= ((qh >> (4 * p + b)) & 1u) << (8 * b + p);
  }
  return o;
}
inline uint32_t FifthBitsFromOctet(uint32_t o) {
  uint32_t qh = 0;
  for (int p = 0; p < 8; ++p) {
    for (int b = 0; b < 4; ++b) qh |= ((o >> (8 * b + p)) & 1u) << (4 * p + b);
  }
  return qh;
}

// Where byte b of row l's block goes in its octet block.
inline size_t OctetOffsetQ4K(int l, size_t b) {
  if (b < 2) return kDs + 2 * l + b;
  if (b < 4) return kDmins + 2 * l + (b - 2);
  if (b < 16) return kWords + (8 * ((b - 4) / 4) + l) * 4 + (b - 4) % 4;
  const size_t c = b - 16;
  return kQuants + ((8 * (c / 32) + (c % 32) / 4) * 8 + l) * 4 + c % 4;
}
inline size_t OctetOffsetQ5K(int l, size_t b) {
  if (b < 16) return OctetOffsetQ4K(l, b);
  if (b < 48) return kQh5 + (8 * ((b - 16) / 4) + l) * 4 + (b - 16) % 4;
  const size_t c = b - 48;
  return kQuants5 + ((8 * (c / 32) + (c % 32) / 4) * 8 + l) * 4 + c % 4;
}
inline size_t OctetOffsetQ6K(int l, size_t b) {
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
inline size_t OctetOffsetQ50(int l, size_t b) {
  if (b < 2) return kDs + 2 * l + b;
  if (b < 6) return kQh50 + 4 * l + (b - 2);
  const size_t c = b - 6;
  return kQs50 + (8 * (c / 4) + l) * 4 + c % 4;
}
// The 32-bit word at p through f.
inline void MapWord(uint8_t* p, uint32_t (*f)(uint32_t)) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  v = f(v);
  std::memcpy(p, &v, 4);
}
inline void FifthBitsOfOctet(uint8_t* octet_block) {
  for (int l = 0; l < 8; ++l) {
    MapWord(octet_block + kQh50 + 4 * l, FifthBitsToOctet);
  }
}
inline void FifthBitsOfRow(uint8_t* row_block) {
  MapWord(row_block + 2, FifthBitsFromOctet);
}

// The octet layout of a type: its GGUF block's bytes and where they go;
// for Q5_0, what is done to the bits of an octet block once its bytes are
// in place (to_octet) and of a row's block taken back (to_row).
struct OctetFormat {
  size_t block;      // bytes of one row's (super-)block
  int64_t elements;  // values a block
  size_t (*offset)(int l, size_t b);
  void (*to_octet)(uint8_t* octet_block) = nullptr;
  void (*to_row)(uint8_t* row_block) = nullptr;
};
inline OctetFormat FormatOf(DType type) {
  switch (type) {
    case DType::kQ4_K:
      return {sizeof(BlockQ4_K), kQK_K, OctetOffsetQ4K};
    case DType::kQ5_K:
      return {sizeof(BlockQ5_K), kQK_K, OctetOffsetQ5K};
    case DType::kQ5_0:
      return {sizeof(BlockQ5_0), kQK, OctetOffsetQ50, FifthBitsOfOctet,
              FifthBitsOfRow};
    default:
      return {sizeof(BlockQ6_K), kQK_K, OctetOffsetQ6K};
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

// Super-block i of T tokens' Q8_K rows from x.
template <int T>
BRAID_AVX2_INLINE void TokenBlocks(const uint8_t* x, size_t x_row_bytes,
                                   int64_t i, const BlockQ8_K** xs) {
#pragma GCC unroll 8
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
#pragma GCC unroll 8
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
#pragma GCC unroll 8
  for (int p = 0; p < 4; ++p) {
    const __m256i m =
        BytesAsPair(p < 2 ? s.m_lo : s.m_hi, (2 * p) % 4, (2 * p + 1) % 4);
    msum = _mm256_add_epi32(
        msum, _mm256_madd_epi16(m, _mm256_set1_epi32(pair_sums[p])));
  }
  return msum;
}

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

// One tile's operands: the octet group from row r (its bytes at w, the
// next group group_bytes on, nb (super-)blocks a row) against tokens from t0
// (their Q8_K rows at x, x_row_bytes apart; outputs at out, ld_y apart).
struct TileArgs {
  const uint8_t* w;
  size_t group_bytes;
  int64_t nb;
  const uint8_t* x;
  size_t x_row_bytes;
  float* out;
  int64_t ld_y;
  bool accumulate;
};

// How far ahead of a tile's super-block the AVX2 tiles fetch their rows
// into L2: the octet groups lie one after another, so this runs into the
// next groups'. One stream of the 1B model on AVX2 decodes 12% faster with
// it (the hardware's stream prefetch alone leaves the tiles waiting); the
// AVX-512 pair tiles, two streams at once, were slower with it.
inline constexpr size_t kAheadBytes = 4096;

// Fetches the lines of the kBlock bytes kAheadBytes after block b into L2.
template <size_t kBlock>
BRAID_AVX2_INLINE void PrefetchAhead(const uint8_t* b) {
#pragma GCC unroll 32
  for (size_t off = 0; off < kBlock; off += 64) {
    PrefetchL2(b + kAheadBytes + off);
  }
}

// Q5_0's per-call activation tables: for token t (of the call) and block i,
// at t * nb + i, the block's scale (xd) and -16 x the sum of its 32 values
// (xc, the offsets' part of the integer sum).
struct Q50Tables {
  const float* xd;
  const int32_t* xc;
};
BRAID_AVX2 inline Q50Tables MakeQ50Tables(const uint8_t* x, size_t x_row_bytes,
                                          int64_t nb, int64_t n_tok) {
  thread_local std::vector<float> xd;
  thread_local std::vector<int32_t> xc;
  const size_t need = static_cast<size_t>(nb * n_tok);
  if (xd.size() < need) {
    xd.resize(need);
    xc.resize(need);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * x_row_bytes);
    for (int64_t i = 0; i < nb; ++i) {
      // The values + 128 as unsigned bytes, summed in four 64-bit lanes.
      const __m256i s = _mm256_sad_epu8(
          _mm256_xor_si256(Load(reinterpret_cast<const uint8_t*>(xb[i].qs)),
                           _mm256_set1_epi8(static_cast<char>(0x80))),
          _mm256_setzero_si256());
      const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s),
                                      _mm256_extracti128_si256(s, 1));
      const int32_t sum = static_cast<int32_t>(
          _mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1) - 32 * 128);
      xd[t * nb + i] = Fp16ToFp32(xb[i].d);
      xc[t * nb + i] = -16 * sum;
    }
  }
  return {xd.data(), xc.data()};
}

// Group p (elements 4p .. 4p + 3) of Q5_0 octet block b's values (0-31),
// `fifth` its fifth-bit words.
BRAID_AVX2_INLINE __m256i QuantsQ50(const uint8_t* b, __m256i fifth, int p) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bits = Load(b + kQs50 + 32 * (p % 4));
  const __m256i nib = p < 4
                          ? _mm256_and_si256(bits, low4)
                          : _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
  // Bit p of each byte at bit 4 (a 16-bit shift moves no other byte's bit
  // there).
  const __m256i at4 = p < 4    ? _mm256_slli_epi16(fifth, 4 - p)
                      : p == 4 ? fifth
                               : _mm256_srli_epi16(fifth, p - 4);
  return _mm256_or_si256(nib, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
}

// Pins a running sum's order: GCC otherwise regroups a fully unrolled
// block's integer adds into trees whose partial sums (one a maddubs) no
// longer fit the registers, and the tile spends its time on spills.
BRAID_AVX2_INLINE void KeepInRegister(__m256i& v) { asm("" : "+v"(v)); }

// acc += the 4-byte group sums of u8 q x s8 x: VNNI's dpbusd (the EVEX form:
// AVX-512 VNNI; by inline assembly, so this body keeps AVX2's target and is
// shared with the AVX2 tiles).
BRAID_AVX2_INLINE void DotBytesVnni(__m256i& acc, __m256i q, __m256i x) {
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(q), "v"(x));
}

// 8 rows of Q5_0 (the octet group at a.w) x T tokens of Q8_0 activations
// (tables tb from the tile's first token, nb blocks a token): per block,
// each row's exact integer sum in its lane, then sum = fma(isum, d_w * d_x,
// sum) in block order: the scalar row dot's arithmetic (DotQ5_0Q8_0Scalar), so
// every output is bit-identical to DotRow. kVnni: dpbusd (AVX-512 VNNI)
// instead of maddubs, 16-bit sums of 4 and madd.
template <int T, bool kVnni>
BRAID_AVX2_INLINE void TileQ50(const TileArgs& a, Q50Tables tb) {
  __m256 sums[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < a.nb; ++i) {
    const uint8_t* b = a.w + i * kOctetBlock50;
    if constexpr (!kVnni) PrefetchAhead<kOctetBlock50>(b);
    const __m256i fifth = Load(b + kQh50);
    const uint8_t* xq[T];
    __m256i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const uint8_t*>(
          reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_row_bytes)[i].qs);
      isum[t] = _mm256_set1_epi32(tb.xc[t * a.nb + i]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i acc[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int p = 4 * h + k;
        const __m256i q = QuantsQ50(b, fifth, p);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t x4;
          std::memcpy(&x4, xq[t] + 4 * p, 4);
          if constexpr (kVnni) {
            DotBytesVnni(isum[t], q, _mm256_set1_epi32(x4));
          } else {
            // |sum| of 4 maddubs pairs <= 4 * 2 * 31 * 127 < 2^15.
            acc[t] = _mm256_add_epi16(
                acc[t], _mm256_maddubs_epi16(q, _mm256_set1_epi32(x4)));
            KeepInRegister(acc[t]);
          }
        }
      }
      if constexpr (!kVnni) {
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(
              isum[t], _mm256_madd_epi16(acc[t], _mm256_set1_epi16(1)));
          KeepInRegister(isum[t]);
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kDs)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      sums[t] = _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(isum[t]),
          _mm256_mul_ps(dw, _mm256_set1_ps(tb.xd[t * a.nb + i])), sums[t]);
    }
  }
  StoreRows<T>(sums, a.out, a.ld_y, a.accumulate);
}

// Batches of at most this many tokens take each octet group for all their
// tokens at once (decode steps): the group's bytes then come from memory
// once, whatever the tile width; larger batches (prompts) take the tokens
// in groups, each over all the range's rows.
inline constexpr int64_t kRowsOuterTokens = 16;

// fn(std::integral_constant<int, w>{}) for w = width, 1 <= width <= kMax.
template <int kMax, typename Fn>
inline void WithWidth(int width, Fn&& fn) {
  if constexpr (kMax > 1) {
    if (width < kMax) return WithWidth<kMax - 1>(width, fn);
  }
  fn(std::integral_constant<int, kMax>{});
}

// The product of octets [r0 / 8, r1 / 8) with n_tok tokens, tile by tile:
// tokens in groups of kMaxT (8 or 4), then one tile of the 1 to kMaxT - 1
// left, in one pass over the rows (7 tokens as tiles of 4, 2 and 1 took
// 1.3-1.45x the time of one tile of 7). Up to kRowsOuterTokens
// tokens, every group of a tile's rows before the next rows (the rows
// stream from memory once, the tokens' activations stay in L1 or L2);
// above, each token group over the range's rows, so the group's activations
// stay in L1 and the rows stream from L2.
// tile(std::integral_constant<int, T>{}, args, rows_left) runs one tile of
// T tokens and returns the rows it took (8 or 16, the same for every T).
template <int kMaxT, typename Tile>
inline void ForEachTile(DType type, const uint8_t* octets, int64_t cols,
                        const uint8_t* x, size_t x_row_bytes, int64_t r0,
                        int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                        bool accumulate, Tile tile) {
  const OctetFormat f = FormatOf(type);
  const int64_t nb = cols / f.elements;
  const size_t group_bytes = nb * 8 * f.block;
  // The tile of kT tokens from t0 and the rows from r; the rows it took.
  auto one = [&](auto width, int64_t r, int64_t t0) {
    return tile(width,
                TileArgs{octets + (r / 8) * group_bytes, group_bytes, nb,
                         x + t0 * x_row_bytes, x_row_bytes, y + t0 * ld_y + r,
                         ld_y, accumulate},
                r1 - r);
  };
  // The tokens past whole tiles of kMaxT take one tile of their own width.
  const int64_t whole = n_tok / kMaxT * kMaxT;
  const int rest = static_cast<int>(n_tok - whole);
  auto rest_tile = [&](int64_t r) {
    int64_t rows = 0;
    WithWidth<kMaxT - 1>(rest,
                         [&](auto width) { rows = one(width, r, whole); });
    return rows;
  };
  constexpr std::integral_constant<int, kMaxT> kFull;
  if (n_tok <= kRowsOuterTokens) {
    for (int64_t r = r0; r < r1;) {
      int64_t rows = 0;
      for (int64_t t0 = 0; t0 < whole; t0 += kMaxT) rows = one(kFull, r, t0);
      if (rest > 0) rows = rest_tile(r);
      r += rows;
    }
    return;
  }
  for (int64_t t0 = 0; t0 < whole; t0 += kMaxT) {
    for (int64_t r = r0; r < r1;) r += one(kFull, r, t0);
  }
  for (int64_t r = r0; rest > 0 && r < r1;) r += rest_tile(r);
}

// Q5_0's product over octets [r0 / 8, r1 / 8) (ForEachTile, with its
// activation tables laid out first): tile(width, args, tables) runs one
// TileQ50 of width's tokens, tables from the tile's first token.
template <int kMaxT, typename Tile>
inline void ForEachTileQ50(const uint8_t* octets, int64_t cols,
                           const uint8_t* x, size_t x_row_bytes, int64_t r0,
                           int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                           bool accumulate, Tile tile) {
  const Q50Tables tb = MakeQ50Tables(x, x_row_bytes, cols / kQK, n_tok);
  ForEachTile<kMaxT>(
      DType::kQ5_0, octets, cols, x, x_row_bytes, r0, r1, n_tok, y, ld_y,
      accumulate, [&](auto width, const TileArgs& a, int64_t) {
        const int64_t t0 = (a.x - x) / x_row_bytes;
        tile(width, a, Q50Tables{tb.xd + t0 * a.nb, tb.xc + t0 * a.nb});
        return int64_t{8};
      });
}

}  // namespace braid::kernels::cpu::internal::octets

#endif  // BRAID_KERNELS_CPU_GEMM_GEMM_OCTETS_H_
