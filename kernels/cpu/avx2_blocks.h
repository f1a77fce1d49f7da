// AVX2 pieces shared by the kernels that unpack 32-element quantized blocks
// (dot_avx2.cc, dot_k_avx2.cc, gemm_tile_avx2.cc): loads, nibble and fifth-bit
// unpacking, horizontal integer sums. Each function carries the AVX2 target
// attribute, so the including file may be compiled without -mavx2. Pure.
#ifndef BRAID_KERNELS_CPU_AVX2_BLOCKS_H_
#define BRAID_KERNELS_CPU_AVX2_BLOCKS_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace braid::kernels::cpu::internal {

__attribute__((target("avx2,f16c"))) inline float H2F(uint16_t h) {
  return _cvtsh_ss(h);
}

__attribute__((target("avx2"))) inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The sum of v's eight 32-bit lanes.
__attribute__((target("avx2"))) inline int HorizontalSumI32(__m256i v) {
  __m128i s =
      _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// 16 bytes of packed nibbles -> 32 bytes: low nibbles (elements 0-15), then
// high nibbles (16-31).
__attribute__((target("avx2"))) inline __m256i UnpackNibbles(
    const uint8_t* qs) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp),
                                                _mm_srli_epi16(tmp, 4), 1);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
}

// Byte j = 0x10 where bit j of the 32 bits at qh is set, else 0 (the fifth
// bits of a Q5_0 / Q5_1 block).
__attribute__((target("avx2"))) inline __m256i FifthBits(const uint8_t* qh) {
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

// The 16 IQ4_NL values (kIq4NlValues) in both 128-bit lanes, for
// _mm256_shuffle_epi8 by the nibbles.
__attribute__((target("avx2"))) inline __m256i Iq4NlTable(
    const int8_t* values) {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
}

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_AVX2_BLOCKS_H_
