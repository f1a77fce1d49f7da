// The weight formats of the AVX-512 GEMM tiles (gemm_tile_avx512.cc: rows
// as in the GGUF file; gemm_quads_avx512.cc: the quad layout): how a tile
// loads a block's scales and quants and forms a block's exact integer sums.
// Q4_1 x Q8_1, Q4_0 x Q8_0, Q5_1 x Q8_1 and Q8_0 x Q8_0 (AVX-512 F/BW/VL/DQ
// and VNNI); Q5_1 x Q8_1 in the row tiles only.
//
// Signed weights (Q8_0) go through dpbusd, which wants one unsigned operand:
// as w + 128 against x, sum((w + 128) * x) - 128 * sum(x) is the same exact
// integer, so the accumulator starts at -128 * sum(x) of the group of 4
// instead of 0 (the row tiles); or as x + 128 against w, starting at
// -128 * sum(w) (the quad tiles, whose activations are laid out once).
// Internal to kernels/cpu.
#ifndef BRAID_KERNELS_CPU_GEMM_GEMM_AVX512_BLOCKS_H_
#define BRAID_KERNELS_CPU_GEMM_GEMM_AVX512_BLOCKS_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant/quant.h"

#define BRAID_AVX512 \
  __attribute__((    \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace braid::kernels::cpu::internal {

BRAID_AVX512 inline uint32_t Load32Bits(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A row pair's nibbles in the quad layout (32 bytes at qs, the pair's 32-bit
// groups alternating) as unsigned bytes: lanes 2k and 2k + 1 hold ggml's
// group k of the pair's first and second row.
BRAID_AVX512 inline __m512i UnpackQuadNibbles(const uint8_t* qs) {
  const __m512i q = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
  return _mm512_and_si512(
      _mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)),
      _mm512_set1_epi8(0x0F));
}

// Rows r and r + 1's nibbles (16 bytes each, at p and p + row_bytes) as
// unsigned bytes: [r low nibbles, r high nibbles, r+1 low, r+1 high],
// ggml's element order.
BRAID_AVX512 inline __m512i UnpackRowPairNibbles(const uint8_t* p,
                                                 size_t row_bytes) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i q1 =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + row_bytes));
  const __m512i q = _mm512_castsi256_si512(
      _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1));
  const __m512i dup = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0));
  const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(dup, shift),
                          _mm512_set1_epi8(0x0F));
}

// Rows r and r + 1's 5-bit values (Q5_0, Q5_1: the nibbles at p and p +
// row_bytes, each row's 32 fifth bits in the 4 bytes before them) as
// unsigned bytes in UnpackRowPairNibbles' order: element e's fifth bit is
// bit e of its row's qh.
BRAID_AVX512 inline __m512i UnpackRowPairFives(const uint8_t* p,
                                               size_t row_bytes) {
  const uint64_t fifth = uint64_t{Load32Bits(p - 4)} |
                         uint64_t{Load32Bits(p + row_bytes - 4)} << 32;
  return _mm512_or_si512(UnpackRowPairNibbles(p, row_bytes),
                         _mm512_maskz_mov_epi8(static_cast<__mmask64>(fifth),
                                               _mm512_set1_epi8(0x10)));
}

// The 4 rows' d (f16, 8 bytes at b) as f32 [d0 0 d1 0 d2 0 d3 0] in lanes
// 0..7 (Q4_1's places of d).
BRAID_AVX512 inline __m512 QuadScalesD(const uint8_t* b) {
  const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm512_castps256_ps512(
      _mm256_cvtph_ps(_mm_unpacklo_epi16(d, _mm_setzero_si128())));
}

// Q4_1 x Q8_1: weights are unsigned nibbles; each block has a min term.
struct Q41 {
  static constexpr DType kType = DType::kQ4_1;
  using W = BlockQ4_1;
  using X = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr bool kSigned = false;
  static constexpr int kQsOffset = 4;  // offsetof(BlockQ4_1, qs)
  static constexpr int kXQsOffset = 4;
  BRAID_AVX512 static __m512i Dot(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, w, x);  // w unsigned, x signed
  }
  // Quad layout (RepackQuads): a block of 4 rows is their 4 (d, m) pairs,
  // then rows 0 and 1's quants with their 32-bit groups alternating, then
  // rows 2 and 3's.
  // The 4 rows' (d, m) as f32 [d0 m0 d1 m1 d2 m2 d3 m3] in lanes 0..7.
  BRAID_AVX512 static __m512 QuadScales(const uint8_t* b) {
    return _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))));
  }
  // Row pair h of a quad block.
  BRAID_AVX512 static __m512i QuadPair(const uint8_t* b, int h) {
    return UnpackQuadNibbles(b + 16 + 32 * h);
  }
  // Rows r and r + 1 of block i (at p and p + row_bytes).
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    return UnpackRowPairNibbles(p, row_bytes);
  }
};

// Q4_0 x Q8_0: nibbles q with weights q - 8, signed like Q8_0's: the quad
// tiles take q - 8 against x + 128, the row tiles q + 120 (= (q - 8) + 128)
// against x. ggml's integer sums, as DotQ4_0Q8_0.
struct Q40 {
  static constexpr DType kType = DType::kQ4_0;
  using W = BlockQ4_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kSigned = true;
  static constexpr int kQsOffset = 2;
  static constexpr int kXQsOffset = 2;
  BRAID_AVX512 static __m512i Dot(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, x, w);
  }
  // Quad layout: the 4 rows' d, then rows 0 and 1's quants with their
  // 32-bit groups alternating, then rows 2 and 3's (Q4_1's, with d alone).
  BRAID_AVX512 static __m512 QuadScales(const uint8_t* b) {
    return QuadScalesD(b);
  }
  BRAID_AVX512 static __m512i QuadPair(const uint8_t* b, int h) {
    return _mm512_sub_epi8(UnpackQuadNibbles(b + 8 + 32 * h),
                           _mm512_set1_epi8(8));
  }
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    return _mm512_add_epi8(UnpackRowPairNibbles(p, row_bytes),
                           _mm512_set1_epi8(120));
  }
};

// Q8_0 x Q8_0: signed weights, offset by 128 (see above).
struct Q80 {
  static constexpr DType kType = DType::kQ8_0;
  using W = BlockQ8_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kSigned = true;
  static constexpr int kQsOffset = 2;
  static constexpr int kXQsOffset = 2;
  // x + 128 unsigned (the quad tiles' layout), w signed.
  BRAID_AVX512 static __m512i Dot(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, x, w);
  }
  // Quad layout: the 4 rows' d, then rows 0 and 1's quants with their
  // 32-bit groups alternating, then rows 2 and 3's.
  BRAID_AVX512 static __m512 QuadScales(const uint8_t* b) {
    return QuadScalesD(b);
  }
  BRAID_AVX512 static __m512i QuadPair(const uint8_t* b, int h) {
    return _mm512_loadu_si512(b + 8 + 64 * h);
  }
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + row_bytes));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// Q5_1 x Q8_1 (row tiles): unsigned 5-bit values and a min term, as Q4_1.
struct Q51 {
  static constexpr DType kType = DType::kQ5_1;
  using W = BlockQ5_1;
  using X = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr bool kSigned = false;
  static constexpr int kQsOffset = 8;  // offsetof(BlockQ5_1, qs)
  static constexpr int kXQsOffset = 4;
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    return UnpackRowPairFives(p, row_bytes);
  }
};

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_GEMM_GEMM_AVX512_BLOCKS_H_
