// Horizontal sums in the order llama.cpp's x86 kernels use, shared by the
// scalar and AVX2 paths that mirror ggml's arithmetic (dot.h, vec_math.h,
// attention_avx2.cc).
//
// ReduceAdd16 sums the 16 lanes of one AVX-512 register as GCC's
// _mm512_reduce_add_ps does: lanes i and i+8, then i and i+4 (i < 4), then
// {0,2} and {1,3}, then the two. HorizontalSum8 is ggml's 8-lane AVX reduction,
// which is the same tree from the second step on. Pure; thread-safe.
#ifndef BRAID_KERNELS_CPU_GGML_REDUCE_H_
#define BRAID_KERNELS_CPU_GGML_REDUCE_H_

#include <immintrin.h>

namespace braid::kernels::cpu::internal {

inline float ReduceAdd16(const float* v) {
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

__attribute__((target("avx2"))) inline float HorizontalSum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The 16 lanes held as lo (lanes 0..7) and hi (lanes 8..15).
__attribute__((target("avx2"))) inline float ReduceAdd16(__m256 lo, __m256 hi) {
  return HorizontalSum8(_mm256_add_ps(lo, hi));
}

// out lane j = HorizontalSum8(v[j]) for j < 8, with its additions: lanes
// i + (i + 4), then (0 + 2) and (1 + 3), then the two.
__attribute__((target("avx2"))) inline __m256 HorizontalSum8x8(
    const __m256* v) {
  __m256 u[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // [v2i lanes i + (i + 4) | v2i+1's]
    const __m256 a = v[2 * i], b = v[2 * i + 1];
    u[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                         _mm256_permute2f128_ps(a, b, 0x31));
  }
  __m256 w[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {  // (0 + 2), (1 + 3) of 4 vectors
    const __m256 a = u[2 * i], b = u[2 * i + 1];
    w[i] = _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // [v0 v2 v4 v6 | v1 v3 v5 v7]
  const __m256 z =
      _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ReduceAdd16 of 16 registers at once (a transpose tree with the same
// additions): out lane j = ReduceAdd16(v[j]).
__attribute__((target("avx512f"))) inline __m512 ReduceAdd16x16(
    const __m512* v) {
  // i + (i + 8): two vectors per register, [a lanes 0..7 | b lanes 0..7].
  __m512 t[8];
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[2 * i], b = v[2 * i + 1];
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // i + (i + 4): four vectors per register, 128-bit block k = vector k.
  __m512 u[4];
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    const __m512 a = t[2 * i], b = t[2 * i + 1];
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // (0 + 2) and (1 + 3), then their sum; block k ends as
  // [vector k, 4 + k, 8 + k, 12 + k] of the group.
  __m512 e[2];
#pragma GCC unroll 16
  for (int i = 0; i < 2; ++i) {
    const __m512 a = u[2 * i], b = u[2 * i + 1];
    e[i] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 h =
      _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4k + m holds vector 4m + k.
  const __m512i order =
      _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, h);
}

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_GGML_REDUCE_H_
