// Horizontal sums in the order llama.cpp's x86 kernels use, shared by the
// scalar and AVX2 paths that mirror ggml's arithmetic (dot.h, vec_math.h).
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

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_GGML_REDUCE_H_
