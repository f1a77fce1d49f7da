#include "kernels/cpu/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"
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

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t n,
             float eps, float* y) {
  int64_t r = 0;
  while (r < n_rows) {
    // Rows 8 (or 4, 2, 1) at a time: one row's chain of double additions
    // is latency-bound (~4 cycles an element).
    double sums[8];
    const int64_t left = n_rows - r;
    const int g = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    if (g == 8) {
      SumSquares<8>(x + r * n, n, sums);
    } else if (g == 4) {
      SumSquares<4>(x + r * n, n, sums);
    } else if (g == 2) {
      SumSquares<2>(x + r * n, n, sums);
    } else {
      SumSquares<1>(x + r * n, n, sums);
    }
    for (int j = 0; j < g; ++j, ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const float scale =
          1.0f / std::sqrt(static_cast<float>(sums[j] / n) + eps);
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * weight[i];
    }
  }
}

void RopeTable(const int32_t* positions, int64_t n_tok, int64_t n_rot,
               float base, float* cs) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  for (int64_t t = 0; t < n_tok; ++t) {
    float theta = static_cast<float>(positions[t]);
    // Incremental powers of theta_scale, as ggml computes them.
    for (int64_t i = 0; i < n_rot; i += 2) {
      cs[t * n_rot + i] = std::cos(theta);
      cs[t * n_rot + i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
  }
}

void RopeApply(float* x, int64_t n_tok, int64_t row_stride, int64_t e0,
               int64_t e1, int64_t head_dim, int64_t n_rot, const float* cs) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* cst = cs + t * n_rot;
    float* xt = x + t * row_stride;
    for (int64_t e = e0; e < e1;) {
      // The rotated pairs of e's head that lie in [e, e1).
      const int64_t head = e - e % head_dim;
      const int64_t end = std::min(e1, head + n_rot);
      for (int64_t j = e; j < end; j += 2) {
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
