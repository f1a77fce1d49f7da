#include "kernels/cpu/vec_math.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace braid::kernels::cpu {
namespace {

std::vector<float> RandomRow(int n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(VecMathTest, ExpGgmlIsAccurateAndSaturates) {
  for (float x = -100.0f; x <= 88.0f; x += 0.37f) {
    EXPECT_NEAR(ExpGgml(x), std::exp(x), 4e-7 * std::exp(x)) << x;
  }
  EXPECT_EQ(ExpGgml(0.0f), 1.0f);
  EXPECT_EQ(ExpGgml(-INFINITY), 0.0f);
  EXPECT_EQ(ExpGgml(-200.0f), 0.0f);
  EXPECT_EQ(ExpGgml(200.0f), INFINITY);
  EXPECT_GT(ExpGgml(-100.0f), 0.0f);  // Subnormal, not flushed.
}

TEST(VecMathTest, ExpShiftedSumGroupsOf16ThenLibmTail) {
  for (int n : {16, 37, 256}) {
    std::vector<float> x = RandomRow(n, 3.0f, n);
    const float max = 4.0f;
    x[5] = -INFINITY;     // A masked entry weighs 0.
    x[7] = max - 95.0f;   // Subnormal result: the AVX2 path's slow lane.
    x[9] = max - 150.0f;  // Below ggml's cut-off: exactly 0.
    std::vector<float> fast(n), avx2(n), slow(n);
    const double fast_sum = ExpShiftedSum(x.data(), max, fast.data(), n);
    SetDisableAvx512ForTesting(true);
    const double avx2_sum = ExpShiftedSum(x.data(), max, avx2.data(), n);
    SetDisableAvx512ForTesting(false);
    SetForceScalarForTesting(true);
    const double slow_sum = ExpShiftedSum(x.data(), max, slow.data(), n);
    SetForceScalarForTesting(false);
    EXPECT_TRUE(SameBits(fast, slow)) << n;
    EXPECT_TRUE(SameBits(avx2, slow)) << n;
    EXPECT_EQ(fast_sum, slow_sum) << n;
    EXPECT_EQ(avx2_sum, slow_sum) << n;
    double ref = 0;
    for (int i = 0; i < n; ++i) {
      const float want =
          i < n - n % 16 ? ExpGgml(x[i] - max) : std::exp(x[i] - max);
      EXPECT_EQ(slow[i], want) << i;
      ref += slow[i];
    }
    EXPECT_EQ(slow[5], 0.0f);
    EXPECT_GT(slow[7], 0.0f);
    EXPECT_LT(slow[7], 1e-38f);
    EXPECT_EQ(slow[9], 0.0f);
    EXPECT_NEAR(slow_sum, ref, 1e-6 * ref);
  }
}

TEST(VecMathTest, SwiGluPathsAgreeBitForBit) {
  for (int n : {16, 40, 1536}) {
    const std::vector<float> x = RandomRow(n, 4.0f, n);
    const std::vector<float> g = RandomRow(n, 1.0f, n + 1);
    std::vector<float> fast(n), avx2(n), slow(n);
    SwiGlu(x.data(), g.data(), fast.data(), n);
    SetDisableAvx512ForTesting(true);
    SwiGlu(x.data(), g.data(), avx2.data(), n);
    SetDisableAvx512ForTesting(false);
    SetForceScalarForTesting(true);
    SwiGlu(x.data(), g.data(), slow.data(), n);
    SetForceScalarForTesting(false);
    EXPECT_TRUE(SameBits(fast, slow)) << n;
    EXPECT_TRUE(SameBits(avx2, slow)) << n;
    for (int i = 0; i < n; ++i) {
      const double ref =
          x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))) * g[i];
      EXPECT_NEAR(slow[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << i;
    }
  }
}

TEST(VecMathTest, SwiGluMayWriteItsInput) {
  std::vector<float> x = RandomRow(32, 2.0f, 3), g = RandomRow(32, 1.0f, 4);
  std::vector<float> want(32);
  SwiGlu(x.data(), g.data(), want.data(), 32);
  SwiGlu(x.data(), g.data(), x.data(), 32);
  EXPECT_TRUE(SameBits(x, want));
}

}  // namespace
}  // namespace braid::kernels::cpu
