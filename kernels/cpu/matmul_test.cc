#include "kernels/cpu/matmul.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {
namespace {

struct Case {
  DType type;
  int64_t rows;
  int64_t cols;
  int64_t n_tok;
};

class MatMulTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatMulTest, MatchesFloatReference) {
  const Case c = GetParam();
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> wf(c.rows * c.cols), x(c.n_tok * c.cols);
  for (float& v : wf) v = dist(rng);
  for (float& v : x) v = dist(rng);
  const size_t row_bytes = DTypeRowBytes(c.type, c.cols);
  std::vector<uint8_t> wq(row_bytes * c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    QuantizeRow(c.type, wf.data() + r * c.cols, wq.data() + r * row_bytes,
                c.cols);
  }
  // Reference: dequantized weights, float activations, double accumulation.
  std::vector<float> wd(c.rows * c.cols);
  for (int64_t r = 0; r < c.rows; ++r) {
    DequantizeRow(c.type, wq.data() + r * row_bytes, wd.data() + r * c.cols,
                  c.cols);
  }
  const WeightMatrix w{c.type, wq.data(), c.rows, c.cols};
  ThreadPool pool(3);
  std::vector<uint8_t> scratch;
  std::vector<float> y(c.n_tok * c.rows, 1.0f);
  MatMul(w, x.data(), c.n_tok, y.data(), /*accumulate=*/false, &pool, &scratch);
  std::vector<float> y_acc(c.n_tok * c.rows, 1.0f);
  MatMul(w, x.data(), c.n_tok, y_acc.data(), /*accumulate=*/true, nullptr,
         &scratch);
  EXPECT_GE(scratch.size(), MatMulScratchBytes(w, c.n_tok));
  // 8-bit activation quantization adds error ~ sqrt(cols) * |w| * amax(x) /
  // 254.
  const bool quantized_act = ActivationDType(c.type) != DType::kF32;
  const double tol = quantized_act ? 0.05 * std::sqrt(c.cols) : 1e-3;
  for (int64_t t = 0; t < c.n_tok; ++t) {
    for (int64_t r = 0; r < c.rows; ++r) {
      double ref = 0;
      for (int64_t i = 0; i < c.cols; ++i) {
        ref += static_cast<double>(wd[r * c.cols + i]) * x[t * c.cols + i];
      }
      ASSERT_NEAR(y[t * c.rows + r], ref, tol) << t << "," << r;
      ASSERT_NEAR(y_acc[t * c.rows + r], ref + 1.0, tol) << t << "," << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulTest,
                         ::testing::Values(Case{DType::kQ4_0, 37, 64, 1},
                                           Case{DType::kQ4_1, 70, 96, 5},
                                           Case{DType::kQ8_0, 9, 32, 3},
                                           Case{DType::kF16, 33, 40, 4},
                                           Case{DType::kBF16, 8, 24, 2},
                                           Case{DType::kF32, 17, 19, 6},
                                           Case{DType::kQ4_1, 192, 576, 17}));

}  // namespace
}  // namespace braid::kernels::cpu
