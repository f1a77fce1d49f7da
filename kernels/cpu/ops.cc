#include "kernels/cpu/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/vec_math.h"

namespace braid::kernels::cpu {
namespace {

// Per lane the first largest element (strict >), then the smallest index
// among the lanes holding the maximum, then the tail: the first largest
// overall.
__attribute__((target("avx2"))) int64_t ArgMaxAvx2(const float* x, int64_t n) {
  __m256 best = _mm256_loadu_ps(x);
  __m256i best_i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i idx = best_i;
  const __m256i eight = _mm256_set1_epi32(8);
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) {
    idx = _mm256_add_epi32(idx, eight);
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
    best = _mm256_blendv_ps(best, v, gt);
    best_i = _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(best_i), _mm256_castsi256_ps(idx), gt));
  }
  alignas(32) float vals[8];
  alignas(32) int32_t inds[8];
  _mm256_store_ps(vals, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(inds), best_i);
  int64_t arg = inds[0];
  float max = vals[0];
  for (int l = 1; l < 8; ++l) {
    if (vals[l] > max || (vals[l] == max && inds[l] < arg)) {
      max = vals[l];
      arg = inds[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > max) {
      max = x[i];
      arg = i;
    }
  }
  return arg;
}

}  // namespace

int64_t ArgMax(const float* x, int64_t n) {
  if (n >= 8 && n <= (int64_t{1} << 30) && UseAvx2()) return ArgMaxAvx2(x, n);
  return std::max_element(x, x + n) - x;
}

namespace {

// The squares of G rows summed as ggml sums one row's (float squares added
// in ggml_float, double, in element order), G rows at a time: each row
// keeps its own sequence of additions, the rows' chains interleave.
template <int G>
void SumSquares(const float* x, int64_t n, double* sums) {
  double s[G] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int g = 0; g < G; ++g) {
      const float square = x[g * n + i] * x[g * n + i];
      s[g] += static_cast<double>(square);
    }
  }
  for (int g = 0; g < G; ++g) sums[g] = s[g];
}

// SumSquares<8> with the 8 rows' chains in the lanes of one register: per 8
// elements, the rows' float squares transposed to one vector per element,
// each widened and added in element order (the same additions per row).
// RmsNorm of 8 rows of 576 in cache: 2.94 us with SumSquares<8> and a
// scalar scale pass, 1.13 with this and ScaleMulAvx512.
__attribute__((target("avx512f"))) void SumSquares8Avx512(const float* x,
                                                          int64_t n,
                                                          double* sums) {
  __m512d acc = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r[8];
    for (int g = 0; g < 8; ++g) {
      r[g] = _mm256_loadu_ps(x + g * n + i);
      r[g] = _mm256_mul_ps(r[g], r[g]);
    }
    // 8 x 8 transpose: c[j] lane g = row g's element i + j.
    __m256 t[8], u[8], c[8];
    for (int g = 0; g < 4; ++g) {
      t[2 * g] = _mm256_unpacklo_ps(r[2 * g], r[2 * g + 1]);
      t[2 * g + 1] = _mm256_unpackhi_ps(r[2 * g], r[2 * g + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
      u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
      u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
      u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
      u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
      c[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
      c[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
    for (int j = 0; j < 8; ++j) acc = _mm512_add_pd(acc, _mm512_cvtps_pd(c[j]));
  }
  _mm512_storeu_pd(sums, acc);
  for (; i < n; ++i) {
    for (int g = 0; g < 8; ++g) {
      const float square = x[g * n + i] * x[g * n + i];
      sums[g] += static_cast<double>(square);
    }
  }
}

// y[i] = x[i] * scale * weight[i], 16 lanes a step (the same two roundings
// per element: ggml's scale, then its multiply by the norm's weight). GCC
// at -O2 left the plain loop scalar: 4 rows of 576 took 1.04 us in cache,
// 0.53 with this; a 4-sequence decode step 1.1-1.3% less (llama_bench,
// steps alternating), 8 sequences 0-1.3%, one stream 0.3%. Returns the
// elements done (a multiple of 16); the caller does the rest.
__attribute__((target("avx512f"))) int64_t ScaleMulAvx512(const float* x,
                                                          float scale,
                                                          const float* weight,
                                                          float* y, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i,
                     _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s),
                                   _mm512_loadu_ps(weight + i)));
  }
  return i;
}

// RopeApply's rotation of the pairs in x[0, n) (n even) by cs ([cos, sin]
// per pair), 8 pairs a step, each element with the scalar loop's
// operations: fma(x0, c, -(x1 * s)) and fma(x0, s, x1 * c). Returns the
// elements done (a multiple of 16); the caller rotates the rest. Against
// the scalar loop, llama_bench steps alternating: 4 sequences 0.3-1.3% less
// a step, 8 sequences -0.6 to 1.3%, one stream 0.3-1.0%.
__attribute__((target("avx512f"))) int64_t RotatePairsAvx512(float* x,
                                                             const float* cs,
                                                             int64_t n) {
  // -0 in the even lanes: negates the products x1 * s there.
  const __m512i neg_even = _mm512_set1_epi64(static_cast<int64_t>(0x80000000u));
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    const __m512 c = _mm512_loadu_ps(cs + j);      // [c s c s ...]
    const __m512 sc = _mm512_permute_ps(c, 0xB1);  // [s c s c ...]
    const __m512 x0 = _mm512_moveldup_ps(v);       // [x0 x0 ...]
    const __m512 x1 = _mm512_movehdup_ps(v);       // [x1 x1 ...]
    const __m512 p = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(x1, sc)), neg_even));
    _mm512_storeu_ps(x + j, _mm512_fmadd_ps(x0, c, p));
  }
  return j;
}

}  // namespace

namespace internal {

void SquareSums(const float* x, int g, int64_t n, double* sums) {
  // Rows 8 (or 4, 2, 1) at a time: one row's chain of double additions is
  // latency-bound (~3.3 cycles an element).
  while (g > 0) {
    const int take = g >= 8 ? 8 : g >= 4 ? 4 : g >= 2 ? 2 : 1;
    switch (take) {
      case 8:
        if (UseAvx512()) {
          SumSquares8Avx512(x, n, sums);
        } else {
          SumSquares<8>(x, n, sums);
        }
        break;
      case 4:
        SumSquares<4>(x, n, sums);
        break;
      case 2:
        SumSquares<2>(x, n, sums);
        break;
      default:
        SumSquares<1>(x, n, sums);
        break;
    }
    x += take * n;
    sums += take;
    g -= take;
  }
}

}  // namespace internal

void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t n,
             float eps, float* y) {
  const bool avx512 = UseAvx512();
  for (int64_t r0 = 0; r0 < n_rows; r0 += 8) {
    const int g = static_cast<int>(std::min<int64_t>(8, n_rows - r0));
    double sums[8];
    internal::SquareSums(x + r0 * n, g, n, sums);
    for (int j = 0; j < g; ++j) {
      const float* xr = x + (r0 + j) * n;
      float* yr = y + (r0 + j) * n;
      const float scale =
          1.0f / std::sqrt(static_cast<float>(sums[j] / n) + eps);
      int64_t i = avx512 ? ScaleMulAvx512(xr, scale, weight, yr, n) : 0;
      for (; i < n; ++i) yr[i] = xr[i] * scale * weight[i];
    }
  }
}

void RopeTable(const int32_t* positions, int64_t n_tok, int64_t n_rot,
               float base, float* cs, const float* freq_factors,
               float freq_scale) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  for (int64_t t = 0; t < n_tok; ++t) {
    float theta = static_cast<float>(positions[t]);
    // Incremental powers of theta_scale, as ggml computes them.
    for (int64_t i = 0; i < n_rot; i += 2) {
      float th = theta;
      if (freq_factors != nullptr) th = th / freq_factors[i / 2];
      if (freq_scale != 1.0f) th = freq_scale * th;
      cs[t * n_rot + i] = std::cos(th);
      cs[t * n_rot + i + 1] = std::sin(th);
      theta *= theta_scale;
    }
  }
}

void RopeApplyNeox(float* x, int64_t n_tok, int64_t row_stride, int64_t e0,
                   int64_t e1, int64_t head_dim, int64_t n_rot,
                   const float* cs) {
  const int64_t half = n_rot / 2;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* cst = cs + t * n_rot;
    for (int64_t head = e0; head < e1; head += head_dim) {
      float* xh = x + t * row_stride + head;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cst[2 * i];
        const float s = cst[2 * i + 1];
        const float x0 = xh[i];
        const float x1 = xh[i + half];
        xh[i] = std::fma(x0, c, -(x1 * s));
        xh[i + half] = std::fma(x0, s, x1 * c);
      }
    }
  }
}

void RopeApply(float* x, int64_t n_tok, int64_t row_stride, int64_t e0,
               int64_t e1, int64_t head_dim, int64_t n_rot, const float* cs) {
  const bool avx512 = UseAvx512();
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* cst = cs + t * n_rot;
    float* xt = x + t * row_stride;
    for (int64_t e = e0; e < e1;) {
      // The rotated pairs of e's head that lie in [e, e1).
      const int64_t head = e - e % head_dim;
      const int64_t end = std::min(e1, head + n_rot);
      int64_t j = e;
      if (avx512 && (j - head) % 2 == 0 && end > j) {
        j += RotatePairsAvx512(xt + j, cst + (j - head), end - j);
      }
      for (; j < end; j += 2) {
        const int64_t i = j - head;
        const float c = cst[i];
        const float s = cst[i + 1];
        const float x0 = xt[j];
        const float x1 = xt[j + 1];
        // The fused forms GCC gives ggml's x0*c - x1*s and x0*s + x1*c.
        xt[j] = std::fma(x0, c, -(x1 * s));
        xt[j + 1] = std::fma(x0, s, x1 * c);
      }
      e = head + head_dim;
    }
  }
}

void RopeNormal(float* x, const int32_t* positions, int64_t n_tok,
                int64_t n_head, int64_t head_dim, int64_t n_rot, float base) {
  float cs[1024];  // n_rot <= head_dim <= 1024 for every supported model.
  for (int64_t t = 0; t < n_tok; ++t) {
    RopeTable(positions + t, 1, n_rot, base, cs);
    RopeApply(x + t * n_head * head_dim, 1, 0, 0, n_head * head_dim, head_dim,
              n_rot, cs);
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  SwiGlu(gate, up, gate, n);
}

void SoftcapInPlace(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void GeluTanhMul(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      const float r = Fp16ToFp32(Fp32ToFp16(x));
      const float g =
          0.5f * r *
          (1.0f + std::tanh(kSqrt2OverPi * r * (1.0f + kCoef * r * r)));
      gate[i] = Fp16ToFp32(Fp32ToFp16(g)) * up[i];
    }
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace braid::kernels::cpu
