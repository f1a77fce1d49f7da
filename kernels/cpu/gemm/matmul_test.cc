#include "kernels/cpu/gemm/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/quant/quant.h"
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

// Activations quantized a column range at a time (StartActivations,
// QuantizeActivationColumns; ranges in any order, as parallel runs finish)
// equal QuantizeActivations byte for byte, and their products MatMul's bit
// for bit: GGUF rows and the quad layout, batches that use prepared tables
// and one that does not; the packed kernels and float weights decline.
TEST(MatMulColumnsTest, ColumnRangesEqualWholeRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t rows = 40, cols = 576;
  ThreadPool pool(2);
  for (DType type : {DType::kQ4_1, DType::kQ8_0, DType::kQ4_0}) {
    std::vector<float> wf(rows * cols);
    for (float& v : wf) v = dist(rng);
    const size_t row_bytes = DTypeRowBytes(type, cols);
    std::vector<uint8_t> wq(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRow(type, wf.data() + r * cols, wq.data() + r * row_bytes, cols);
    }
    for (bool quads : {false, true}) {
      WeightMatrix w{type, wq.data(), rows, cols};
      if (quads && !RepackQuadMatrix(&w)) continue;
      for (int64_t n_tok : {1, 3, 4, 8, 16, 300}) {
        std::vector<float> x(n_tok * cols);
        for (float& v : x) v = dist(rng);
        std::vector<uint8_t> whole_scratch, cols_scratch;
        const QuantizedActivations whole =
            QuantizeActivations(w, x.data(), n_tok, &whole_scratch, &pool);
        QuantizedActivations q;
        ASSERT_TRUE(StartActivations(w, n_tok, &cols_scratch, &q));
        // 64-column ranges from the back, then the first 32 columns.
        for (int64_t c1 = cols; c1 > 32; c1 -= 64) {
          QuantizeActivationColumns(w, x.data(), cols, q,
                                    std::max<int64_t>(32, c1 - 64), c1);
        }
        QuantizeActivationColumns(w, x.data(), cols, q, 0, 32);
        ASSERT_EQ(q.has_tiles, whole.has_tiles) << n_tok;
        ASSERT_EQ(0, std::memcmp(q.data, whole.data, q.row_bytes * n_tok))
            << DTypeName(type) << " " << n_tok;
        std::vector<float> want(n_tok * rows), got(n_tok * rows);
        MatMul(w, x.data(), n_tok, want.data(), false, &pool, &whole_scratch);
        MatMulQuantized(w, q, got.data(), false, &pool);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << DTypeName(type) << " quads " << quads
                                     << " n_tok " << n_tok << " at " << i;
        }
      }
    }
  }
  // Float weights and packed weights take whole rows.
  std::vector<uint8_t> scratch;
  QuantizedActivations q;
  std::vector<float> wf(4 * 32, 1.0f);
  EXPECT_FALSE(StartActivations(WeightMatrix{DType::kF32, wf.data(), 4, 32}, 1,
                                &scratch, &q));
  std::vector<uint8_t> wq(DTypeRowBytes(DType::kQ4_1, 512) * 64);
  WeightMatrix packed{DType::kQ4_1, wq.data(), 64, 512};
  if (PackWeightMatrix(&packed)) {
    EXPECT_FALSE(StartActivations(packed, 1, &scratch, &q));
  }
}

}  // namespace
}  // namespace braid::kernels::cpu
