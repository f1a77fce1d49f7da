#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu {
namespace {

TEST(OpsTest, RmsNorm) {
  const std::vector<float> x = {1, 2, 3, 4, -1, -1, -1, -1};
  const std::vector<float> w = {1, 1, 2, 0.5f};
  std::vector<float> y(8);
  RmsNorm(x.data(), w.data(), 2, 4, 0.0f, y.data());
  const float s0 = 1.0f / std::sqrt(30.0f / 4);
  EXPECT_NEAR(y[0], 1 * s0, 1e-6);
  EXPECT_NEAR(y[2], 3 * s0 * 2, 1e-6);
  EXPECT_NEAR(y[3], 4 * s0 * 0.5f, 1e-6);
  EXPECT_NEAR(y[4], -1.0f, 1e-6);
}

// Rows normalized in one call (15: groups of 8, 4, 2 and 1) equal each row
// alone and ggml's sequential double sum, bit for bit; rows of 576 and of
// 581 elements (tails past the vector steps).
TEST(OpsTest, RmsNormRowsTogetherEqualEachAlone) {
  for (const int64_t n : {576, 581}) {
    const int64_t rows = 15;
    std::vector<float> x(rows * n), w(n);
    // Magnitudes 1e-4 to 1e4: the double sums round, so their order shows.
    for (int64_t i = 0; i < rows * n; ++i) {
      x[i] = std::sin(0.37f * i) * std::pow(10.0f, i % 9 - 4.0f);
    }
    for (int64_t i = 0; i < n; ++i) w[i] = 0.5f + 0.01f * (i % 50);
    std::vector<float> together(rows * n), alone(rows * n);
    RmsNorm(x.data(), w.data(), rows, n, 1e-5f, together.data());
    for (int64_t r = 0; r < rows; ++r) {
      RmsNorm(&x[r * n], w.data(), 1, n, 1e-5f, &alone[r * n]);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float sq = x[r * n + i] * x[r * n + i];
        sum += static_cast<double>(sq);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + 1e-5f);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(alone[r * n + i], x[r * n + i] * scale * w[i])
            << r << " " << i;
      }
    }
    EXPECT_EQ(together, alone);
  }
}

// The sums of squares of 1-8 rows at once, each bit for bit ggml's
// sequential double sum, on values whose sums round (magnitudes 1e-4 to
// 1e4), at 576 and 581 elements (tails past the vector steps).
TEST(OpsTest, SquareSumsAreSequentialDoubleSums) {
  for (const int64_t n : {576, 581}) {
    std::vector<float> x(8 * n);
    for (int64_t i = 0; i < 8 * n; ++i) {
      x[i] = std::sin(0.37f * i) * std::pow(10.0f, i % 9 - 4.0f);
    }
    for (int g = 1; g <= 8; ++g) {
      double sums[8];
      internal::SquareSums(x.data(), g, n, sums);
      for (int r = 0; r < g; ++r) {
        double want = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float sq = x[r * n + i] * x[r * n + i];
          want += static_cast<double>(sq);
        }
        EXPECT_EQ(sums[r], want) << "n " << n << " g " << g << " row " << r;
      }
    }
  }
}

TEST(OpsTest, RopeRotatesAdjacentPairs) {
  // 2 tokens, 2 heads, head_dim 4, full rotation.
  const int64_t hd = 4;
  std::vector<float> x(2 * 2 * hd);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * (i + 1);
  std::vector<float> ref = x;
  const int32_t pos[2] = {0, 7};
  const float base = 10000.0f;
  RopeNormal(x.data(), pos, 2, 2, hd, hd, base);
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < hd; i += 2) {
        const float theta =
            pos[t] * std::pow(base, -static_cast<float>(i) / hd);
        const float* r = &ref[(t * 2 + h) * hd + i];
        const float* o = &x[(t * 2 + h) * hd + i];
        EXPECT_NEAR(o[0], r[0] * std::cos(theta) - r[1] * std::sin(theta),
                    1e-5);
        EXPECT_NEAR(o[1], r[0] * std::sin(theta) + r[1] * std::cos(theta),
                    1e-5);
      }
    }
  }
}

TEST(OpsTest, RopePartialRotationLeavesTail) {
  std::vector<float> x = {1, 2, 3, 4};
  const int32_t pos[1] = {3};
  RopeNormal(x.data(), pos, 1, 1, 4, 2, 10000.0f);
  EXPECT_EQ(x[2], 3.0f);
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_NEAR(x[0] * x[0] + x[1] * x[1], 5.0f, 1e-5);
}

// RopeApply over a row range in pieces (cut inside heads, inside and past
// the rotated part) equals RopeNormal over the whole rows, bit for bit: the
// model's Q/K/V tasks split the rows in units of 16, not heads. Pieces of 2
// take the scalar loop, whole heads the 16-lane one (with AVX-512).
TEST(OpsTest, RopeApplyOnPiecesEqualsWholeRows) {
  const int64_t hd = 64, n_head = 3, n_tok = 2;
  const int32_t pos[n_tok] = {5, 1234};
  for (int64_t n_rot : {64, 32}) {
    std::vector<float> x(n_tok * n_head * hd);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i);
    std::vector<float> whole = x;
    RopeNormal(whole.data(), pos, n_tok, n_head, hd, n_rot, 10000.0f);
    std::vector<float> cs(n_tok * n_rot);
    RopeTable(pos, n_tok, n_rot, 10000.0f, cs.data());
    for (int64_t piece : {16, 2, 48, 192}) {
      std::vector<float> pieces = x;
      for (int64_t e = 0; e < n_head * hd; e += piece) {
        RopeApply(pieces.data(), n_tok, n_head * hd, e,
                  std::min(e + piece, n_head * hd), hd, n_rot, cs.data());
      }
      ASSERT_EQ(pieces, whole) << "n_rot " << n_rot << " piece " << piece;
    }
  }
}

TEST(OpsTest, SiluMulAndSoftmaxAndAdd) {
  std::vector<float> g = {0.0f, 1.0f, -2.0f};
  const std::vector<float> u = {5.0f, 2.0f, 1.0f};
  SiluMul(g.data(), u.data(), 3);
  EXPECT_NEAR(g[0], 0.0f, 1e-7);
  EXPECT_NEAR(g[1], 2.0f / (1.0f + std::exp(-1.0f)), 1e-6);
  EXPECT_NEAR(g[2], -2.0f / (1.0f + std::exp(2.0f)), 1e-6);
  std::vector<float> s = {1000.0f, 1000.0f, -1e30f};
  Softmax(s.data(), 3);
  EXPECT_NEAR(s[0], 0.5f, 1e-6);
  EXPECT_NEAR(s[2], 0.0f, 1e-6);
  std::vector<float> y = {1, 2};
  const std::vector<float> x = {3, 4};
  AddInPlace(y.data(), x.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{4, 6}));
}

// ArgMax is std::max_element's index: the first of equal maxima, wherever
// they fall (lanes, the tail), on the AVX2 path and the scalar one.
TEST(OpsTest, SoftcapInPlace) {
  float x[] = {0.0f, 1.0f, -3.0f, 1000.0f};
  SoftcapInPlace(x, 4, 2.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_FLOAT_EQ(x[1], 2.0f * std::tanh(0.5f));
  EXPECT_FLOAT_EQ(x[2], 2.0f * std::tanh(-1.5f));
  EXPECT_FLOAT_EQ(x[3], 2.0f);  // saturates at the cap
}

TEST(OpsTest, GeluTanhMulIsGgmlsTable) {
  // Values against the tanh formula in double, with ggml's fp16 rounding of
  // the input and of GELU's value; the ends are exact.
  const float gate_in[] = {-12.0f, -10.0f, -1.3f, -0.01f, 0.0f,
                           0.5f,   2.0f,   9.99f, 10.0f,  12.0f};
  const int n = sizeof(gate_in) / sizeof(gate_in[0]);
  std::vector<float> gate(gate_in, gate_in + n), up(n, 2.0f);
  GeluTanhMul(gate.data(), up.data(), n);
  EXPECT_EQ(gate[0], 0.0f);
  EXPECT_EQ(gate[1], 0.0f);
  EXPECT_EQ(gate[8], 20.0f);
  EXPECT_EQ(gate[9], 24.0f);
  for (int i = 2; i < 8; ++i) {
    const double x = gate_in[i];
    const double g =
        0.5 * x *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(gate[i], g * 2, 2e-3 * (1 + std::abs(g))) << x;
    // The table's value: an fp16 number times up.
    EXPECT_EQ(gate[i] / 2, Fp16ToFp32(Fp32ToFp16(gate[i] / 2))) << x;
  }
}

TEST(OpsTest, ArgMaxIsTheFirstLargest) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> value(-20, 20);
  for (int scalar = 0; scalar < 2; ++scalar) {
    SetForceScalarForTesting(scalar == 1);
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 49152}) {
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<float> x(n);
        // Few distinct values: many ties between lanes and with the tail.
        for (float& v : x) v = static_cast<float>(value(rng));
        ASSERT_EQ(ArgMax(x.data(), n),
                  std::max_element(x.begin(), x.end()) - x.begin())
            << "n " << n << " scalar " << scalar;
      }
    }
  }
  SetForceScalarForTesting(false);
}

}  // namespace
}  // namespace braid::kernels::cpu
