// AVX2 + FMA paths of vec_math.h: the same per-lane operations as ggml's
// AVX-512 ggml_v_expf, 8 lanes at a time. Compiled with target attributes so
// the binary still runs (through the scalar path) on CPUs without AVX2.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/vec_math.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline __m256 ExpGgml8(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                       _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                      _mm256_set1_ps(0x1.573e2ep-5f)),
                      u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                      _mm256_set1_ps(0x1.fffdb6p-2f))),
      u,
      _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  if (_mm256_movemask_ps(
          _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ)) == 0) {
    // 2^n is a normal float: j * 2^n rounds once, exactly like scalef.
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(j, _mm256_castsi256_ps(e));
  }
  // Rare (results near the float range limits): per lane, in double.
  alignas(32) float jv[8], nv[8], out[8];
  _mm256_store_ps(jv, j);
  _mm256_store_ps(nv, n);
  for (int l = 0; l < 8; ++l) {
    if (std::fabs(nv[l]) > 192.0f) {
      out[l] = nv[l] <= 0.0f ? 0.0f : INFINITY;
    } else {
      out[l] = static_cast<float>(static_cast<double>(jv[l]) *
                                  std::ldexp(1.0, static_cast<int>(nv[l])));
    }
  }
  return _mm256_load_ps(out);
}

}  // namespace

BRAID_AVX2 double ExpShiftedSumAvx2(const float* x, float max, float* y,
                                    int64_t n) {
  const __m256 vmax = _mm256_set1_ps(max);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + kGgmlLanes <= n; i += kGgmlLanes) {
    const __m256 lo = ExpGgml8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    const __m256 hi = ExpGgml8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmax));
    _mm256_storeu_ps(y + i, lo);
    _mm256_storeu_ps(y + i + 8, hi);
    sum += static_cast<double>(ReduceAdd16(lo, hi));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

BRAID_AVX2 void SwiGluAvx2(const float* x, const float* g, float* y,
                           int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const int64_t n_vec = n - n % kGgmlLanes;
  int64_t i = 0;
  for (; i < n_vec; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = ExpGgml8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    const __m256 silu = _mm256_div_ps(v, _mm256_add_ps(one, e));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(g + i)));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

}  // namespace braid::kernels::cpu::internal
