// Random quantized operands for the GEMM kernels' tests: weights [rows,
// cols] of a weight type and activations [n_tok, cols] in its activation
// type, from normal floats (the activations' scaled by x_scale).
#ifndef BRAID_KERNELS_CPU_TESTING_RANDOM_OPERANDS_H_
#define BRAID_KERNELS_CPU_TESTING_RANDOM_OPERANDS_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu::testing {

struct RandomOperands {
  size_t w_bytes, x_bytes;  // row bytes
  std::vector<uint8_t> w, x;
};

inline RandomOperands MakeRandomOperands(DType type, int64_t rows, int64_t cols,
                                         int64_t n_tok, float x_scale,
                                         std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const DType act = ActivationDType(type);
  RandomOperands o{DTypeRowBytes(type, cols), DTypeRowBytes(act, cols), {}, {}};
  std::vector<float> f(cols);
  o.w.resize(rows * o.w_bytes);
  o.x.resize(n_tok * o.x_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : f) v = dist(rng);
    QuantizeRow(type, f.data(), &o.w[r * o.w_bytes], cols);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    for (float& v : f) v = dist(rng) * x_scale;
    QuantizeRow(act, f.data(), &o.x[t * o.x_bytes], cols);
  }
  return o;
}

}  // namespace braid::kernels::cpu::testing

#endif  // BRAID_KERNELS_CPU_TESTING_RANDOM_OPERANDS_H_
