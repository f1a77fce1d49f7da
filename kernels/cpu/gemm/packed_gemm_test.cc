#include "kernels/cpu/gemm/packed_gemm.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant/dot.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cpu/testing/random_operands.h"

namespace braid::kernels::cpu {
namespace {

struct Data {
  int64_t rows, cols, n_tok;
  size_t w_bytes, x_bytes;
  std::vector<uint8_t> w, x;
  std::vector<float> tables;
};

Data Make(DType type, int64_t rows, int64_t cols, int64_t n_tok,
          uint32_t seed) {
  std::mt19937 rng(seed);
  testing::RandomOperands o =
      testing::MakeRandomOperands(type, rows, cols, n_tok, 3.0f, rng);
  Data d{rows,      cols,           n_tok,          o.w_bytes,
         o.x_bytes, std::move(o.w), std::move(o.x), {}};
  d.tables.resize(PackedActivationFloats(cols, n_tok));
  PreparePackedActivations(type, d.x.data(), d.x_bytes, cols, n_tok,
                           d.tables.data());
  return d;
}

// Every element of every tile shape (1..8 tokens, several tiles of 8 and a
// remainder) and row range equals PackedDotReference bit for bit, stored and
// accumulated.
TEST(PackedGemmTest, BitIdenticalToReferenceForEveryTileShape) {
  if (!UsesPackedActivations(DType::kQ4_1)) {
    GTEST_SKIP() << "needs AVX-512 + VNNI (the packed kernels do not run here)";
  }
  for (DType type : {DType::kQ4_1, DType::kQ8_0}) {
    const Data d = Make(type, 48, 160, 27, 5);
    ASSERT_TRUE(CanPackWeights(type, d.rows, d.cols));
    const PackedWeights p = PackWeights(type, d.w.data(), d.rows, d.cols);
    std::vector<float> want(d.n_tok * d.rows);
    for (int64_t t = 0; t < d.n_tok; ++t) {
      for (int64_t r = 0; r < d.rows; ++r) {
        want[t * d.rows + r] = PackedDotReference(type, &d.w[r * d.w_bytes],
                                                  &d.x[t * d.x_bytes], d.cols);
      }
    }
    for (int64_t tok : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 27}) {
      for (auto [r0, r1] :
           {std::pair<int64_t, int64_t>{0, 48}, {16, 32}, {32, 48}}) {
        std::vector<float> tables(PackedActivationFloats(d.cols, tok));
        PreparePackedActivations(type, d.x.data(), d.x_bytes, d.cols, tok,
                                 tables.data());
        std::vector<float> y(tok * d.rows, 0.5f);
        PackedGemm(p, d.x.data(), d.x_bytes, tables.data(), tok, r0, r1,
                   y.data(), d.rows, /*accumulate=*/false);
        std::vector<float> ya(tok * d.rows, 0.25f);
        PackedGemm(p, d.x.data(), d.x_bytes, tables.data(), tok, r0, r1,
                   ya.data(), d.rows, /*accumulate=*/true);
        for (int64_t t = 0; t < tok; ++t) {
          for (int64_t r = 0; r < d.rows; ++r) {
            const bool in = r >= r0 && r < r1;
            const float w = want[t * d.rows + r];
            ASSERT_EQ(y[t * d.rows + r], in ? w : 0.5f)
                << DTypeName(type) << " tok " << tok << " t " << t << " r "
                << r;
            ASSERT_EQ(ya[t * d.rows + r], in ? 0.25f + w : 0.25f)
                << DTypeName(type) << " tok " << tok << " t " << t << " r "
                << r;
          }
        }
      }
    }
  }
}

// The packed arithmetic computes the same dot product as ggml's row dot, up
// to float rounding (its block sums are exact integers).
TEST(PackedGemmTest, ReferenceAgreesWithDotRow) {
  for (DType type : {DType::kQ4_1, DType::kQ8_0}) {
    const Data d = Make(type, 16, 576, 4, 11);
    for (int64_t t = 0; t < d.n_tok; ++t) {
      for (int64_t r = 0; r < d.rows; ++r) {
        const float a = PackedDotReference(type, &d.w[r * d.w_bytes],
                                           &d.x[t * d.x_bytes], d.cols);
        const float b =
            DotRow(type, &d.w[r * d.w_bytes], &d.x[t * d.x_bytes], d.cols);
        EXPECT_NEAR(a, b, 1e-4f * (1.0f + std::fabs(b)));
      }
    }
  }
}

TEST(PackedGemmTest, OnlyPackableShapesAndTypes) {
  EXPECT_FALSE(CanPackWeights(DType::kQ4_1, 24, 64));
  EXPECT_FALSE(CanPackWeights(DType::kQ4_0, 32, 64));
  EXPECT_FALSE(CanPackWeights(DType::kF16, 32, 64));
  EXPECT_EQ(CanPackWeights(DType::kQ4_1, 32, 64), UseAvx512());
  SetDisableAvx512ForTesting(true);
  EXPECT_FALSE(CanPackWeights(DType::kQ4_1, 32, 64));
  SetDisableAvx512ForTesting(false);
}

}  // namespace
}  // namespace braid::kernels::cpu
