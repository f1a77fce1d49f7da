#include "kernels/cpu/vec_math.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ggml_reduce.h"

namespace braid::kernels::cpu {

float ExpGgml(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fmaf(x, 0x1.715476p+0f, r);
  const float n = z - r;  // round(x * log2(e)), exactly integral
  const float b =
      std::fmaf(-n, 0x1.7f7d1cp-20f, std::fmaf(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j =
      std::fmaf(std::fmaf(std::fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                          std::fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                u, std::fmaf(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  // scalef(j, n): j * 2^n rounded once. The product is exact in double.
  return static_cast<float>(static_cast<double>(j) *
                            std::ldexp(1.0, static_cast<int>(n)));
}

double ExpShiftedSum(const float* x, float max, float* y, int64_t n) {
  if (UseAvx512()) return internal::ExpShiftedSumAvx512(x, max, y, n);
  return UseAvx2() ? internal::ExpShiftedSumAvx2(x, max, y, n)
                   : internal::ExpShiftedSumScalar(x, max, y, n);
}

void SwiGlu(const float* x, const float* g, float* y, int64_t n) {
  if (UseAvx512()) return internal::SwiGluAvx512(x, g, y, n);
  if (UseAvx2()) return internal::SwiGluAvx2(x, g, y, n);
  internal::SwiGluScalar(x, g, y, n);
}

namespace internal {

double ExpShiftedSumScalar(const float* x, float max, float* y, int64_t n) {
  double sum = 0.0;
  int64_t i = 0;
  for (; i + kGgmlLanes <= n; i += kGgmlLanes) {
    for (int l = 0; l < kGgmlLanes; ++l) y[i + l] = ExpGgml(x[i + l] - max);
    sum += static_cast<double>(ReduceAdd16(y + i));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

void SwiGluScalar(const float* x, const float* g, float* y, int64_t n) {
  const int64_t n_vec = n - n % kGgmlLanes;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = i < n_vec ? ExpGgml(0.0f - v) : std::exp(-v);
    y[i] = v / (1.0f + e) * g[i];
  }
}

}  // namespace internal
}  // namespace braid::kernels::cpu
