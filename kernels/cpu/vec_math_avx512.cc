// AVX-512 path of vec_math.h's ExpShiftedSum: ggml's own AVX-512 ggml_v_expf,
// 16 lanes a vector, 2^n applied by scalef (which the AVX2 path emulates, with
// a per-lane fallback for results near the float range limits that softmax
// rows hit often: masked -inf entries, scores far below the maximum).
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/vec_math.h"

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX512 inline __m512 ExpGgml16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                       _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                      _mm512_set1_ps(0x1.573e2ep-5f)),
                      u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                      _mm512_set1_ps(0x1.fffdb6p-2f))),
      u,
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  const __m512 abs_n = _mm512_abs_ps(n);
  const __mmask16 out_of_range =
      _mm512_cmp_ps_mask(abs_n, _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (out_of_range == 0) return res;
  const __mmask16 below =
      _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 alt = _mm512_mask_blend_ps(below, _mm512_set1_ps(INFINITY),
                                          _mm512_setzero_ps());
  return _mm512_mask_blend_ps(out_of_range, res, alt);
}

}  // namespace

BRAID_AVX512 double ExpShiftedSumAvx512(const float* x, float max, float* y,
                                        int64_t n) {
  const __m512 vmax = _mm512_set1_ps(max);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + kGgmlLanes <= n; i += kGgmlLanes) {
    const __m512 e = ExpGgml16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
    _mm512_storeu_ps(y + i, e);
    sum += static_cast<double>(
        ReduceAdd16(_mm512_castps512_ps256(e), _mm512_extractf32x8_ps(e, 1)));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

// SwiGluAvx2's per-lane operations (ggml_v_silu times g) 16 lanes a step,
// as ggml's AVX-512 build runs them. Against the 8-lane form, llama_bench
// steps alternating: 4 sequences 0.2-0.6% less a step, 8 sequences -0.6
// to 1.2%.
BRAID_AVX512 void SwiGluAvx512(const float* x, const float* g, float* y,
                               int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const int64_t n_vec = n - n % kGgmlLanes;
  int64_t i = 0;
  for (; i < n_vec; i += kGgmlLanes) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 e = ExpGgml16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    const __m512 silu = _mm512_div_ps(v, _mm512_add_ps(one, e));
    _mm512_storeu_ps(y + i, _mm512_mul_ps(silu, _mm512_loadu_ps(g + i)));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

}  // namespace braid::kernels::cpu::internal
