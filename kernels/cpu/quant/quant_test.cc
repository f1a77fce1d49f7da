#include "kernels/cpu/quant/quant.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu {
namespace {

std::vector<float> RandomRow(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(QuantTest, Sizes) {
  EXPECT_EQ(DTypeRowBytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(DTypeRowBytes(DType::kQ4_1, 64), 40u);
  EXPECT_EQ(DTypeRowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(DTypeRowBytes(DType::kF16, 64), 128u);
  EXPECT_TRUE(IsKnownDType(30));
  EXPECT_TRUE(IsKnownDType(12));   // Q4_K
  EXPECT_FALSE(IsKnownDType(16));  // IQ2_XXS is not supported.
  EXPECT_EQ(DTypeRowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(DTypeRowBytes(DType::kQ6_K, 256), 210u);
  EXPECT_EQ(DTypeRowBytes(DType::kQ5_0, 64), 44u);
  EXPECT_EQ(ActivationDType(DType::kQ3_K), DType::kQ8_K);
  EXPECT_EQ(ActivationDType(DType::kQ5_1), DType::kQ8_1);
  EXPECT_EQ(ActivationDType(DType::kIQ4_NL), DType::kQ8_0);
  EXPECT_EQ(ActivationDType(DType::kQ4_1), DType::kQ8_1);
  EXPECT_EQ(ActivationDType(DType::kQ4_0), DType::kQ8_0);
}

TEST(QuantTest, HandBuiltBlocksDequantize) {
  BlockQ4_0 q40{Fp32ToFp16(0.5f), {}};
  BlockQ4_1 q41{Fp32ToFp16(0.5f), Fp32ToFp16(-1.0f), {}};
  for (int j = 0; j < 16; ++j) {
    q40.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    q41.qs[j] = q40.qs[j];
  }
  float out[32];
  DequantizeRow(DType::kQ4_0, &q40, out, 32);
  EXPECT_EQ(out[0], -4.0f);   // (0 - 8) * 0.5
  EXPECT_EQ(out[16], 3.5f);   // (15 - 8) * 0.5
  EXPECT_EQ(out[31], -4.0f);  // High nibble of byte 15 is 0.
  DequantizeRow(DType::kQ4_1, &q41, out, 32);
  EXPECT_EQ(out[1], -0.5f);  // 1 * 0.5 - 1
  EXPECT_EQ(out[17], 6.0f);  // 14 * 0.5 - 1
}

// Round trip error is within the format's step size.
TEST(QuantTest, RoundTripErrorIsBounded) {
  const int n = 256;
  const std::vector<float> x = RandomRow(n, 1);
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ8_1,
                  DType::kF16, DType::kBF16, DType::kF32}) {
    std::vector<uint8_t> q(DTypeRowBytes(t, n));
    QuantizeRow(t, x.data(), q.data(), n);
    std::vector<float> y(n);
    DequantizeRow(t, q.data(), y.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j)
        amax = std::max(amax, std::fabs(x[b * 32 + j]));
      const float tol = (t == DType::kQ4_0 || t == DType::kQ4_1) ? amax / 7.0f
                        : (t == DType::kQ8_0 || t == DType::kQ8_1)
                            ? amax / 127.0f
                            : amax / 128.0f;
      for (int j = 0; j < 32; ++j) {
        ASSERT_NEAR(x[b * 32 + j], y[b * 32 + j], tol) << DTypeName(t);
      }
    }
  }
}

// The other weight types' quantizers (round to nearest) and dequantizers
// agree: the round trip error is within a fraction of each block's range,
// which a layout mismatch between the two (an element written to one place
// and read from another) would far exceed.
TEST(QuantTest, WeightTypesRoundTrip) {
  const int n = 2 * kQK_K;
  const std::vector<float> x = RandomRow(n, 3);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const struct {
    DType type;
    float rel;  // max error / the row's amax
  } cases[] = {
      {DType::kQ5_0, 0.07f}, {DType::kQ5_1, 0.05f}, {DType::kIQ4_NL, 0.15f},
      {DType::kQ2_K, 0.45f}, {DType::kQ3_K, 0.25f}, {DType::kQ4_K, 0.12f},
      {DType::kQ5_K, 0.06f}, {DType::kQ6_K, 0.03f}, {DType::kQ8_K, 0.01f}};
  for (const auto& c : cases) {
    std::vector<uint8_t> q(DTypeRowBytes(c.type, n));
    QuantizeRow(c.type, x.data(), q.data(), n);
    std::vector<float> y(n);
    DequantizeRow(c.type, q.data(), y.data(), n);
    double err2 = 0, x2 = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(x[i], y[i], c.rel * amax) << DTypeName(c.type) << " " << i;
      err2 += (x[i] - y[i]) * (x[i] - y[i]);
      x2 += x[i] * x[i];
    }
    EXPECT_LT(err2 / x2, c.rel * c.rel) << DTypeName(c.type);
  }
}

TEST(QuantTest, Q8_1SumMatchesQuants) {
  const std::vector<float> x = RandomRow(64, 2);
  BlockQ8_1 y[2];
  QuantizeRowQ8_1(x.data(), y, 64);
  for (const BlockQ8_1& b : y) {
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    EXPECT_NEAR(Fp16ToFp32(b.s), Fp16ToFp32(b.d) * sum, 1e-2);
  }
}

TEST(QuantTest, ZeroBlockQuantizesToZero) {
  std::vector<float> x(32, 0.0f);
  BlockQ8_0 y;
  QuantizeRowQ8_0(x.data(), &y, 32);
  EXPECT_EQ(Fp16ToFp32(y.d), 0.0f);
  for (int8_t q : y.qs) EXPECT_EQ(q, 0);
}

// The AVX2 activation quantizers give the scalar ones' blocks byte for byte:
// random rows at several scales, rounding ties (x * id on .5), zero blocks.
TEST(QuantTest, Avx2ActivationQuantizersMatchScalar) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int64_t kN = 64 * kQK;
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i)
    x[i] = dist(rng) * std::ldexp(1.0f, i % 23 - 11);
  for (int j = 0; j < kQK; ++j) {
    x[kQK + j] = 0.0f;                 // A zero block.
    x[2 * kQK + j] = (j - 15.5f) / 2;  // amax 8: id = 127/8, ties appear.
    x[3 * kQK + j] = j % 2 ? 127.0f : -0.5f - j;  // x * id exactly k + 0.5.
  }
  std::vector<BlockQ8_0> a0(kN / kQK), b0(kN / kQK);
  std::vector<BlockQ8_1> a1(kN / kQK), b1(kN / kQK);
  internal::QuantizeRowQ8_0Avx2(x.data(), a0.data(), kN);
  internal::QuantizeRowQ8_0Scalar(x.data(), b0.data(), kN);
  internal::QuantizeRowQ8_1Avx2(x.data(), a1.data(), kN);
  internal::QuantizeRowQ8_1Scalar(x.data(), b1.data(), kN);
  for (int64_t b = 0; b < kN / kQK; ++b) {
    ASSERT_EQ(std::memcmp(&a0[b], &b0[b], sizeof(BlockQ8_0)), 0) << b;
    ASSERT_EQ(std::memcmp(&a1[b], &b1[b], sizeof(BlockQ8_1)), 0) << b;
  }
}

TEST(QuantTest, Avx2Q8KQuantizerMatchesScalar) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int64_t kN = 24 * kQK_K;
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i)
    x[i] = dist(rng) * std::ldexp(1.0f, (i / kQK_K) % 17 - 8);
  for (int j = 0; j < kQK_K; ++j) {
    x[kQK_K + j] = j % 3 == 0 ? -0.0f : 0.0f;  // A zero block.
    x[2 * kQK_K + j] = (j - 127.5f) / 4;       // Ties at rounding.
    x[3 * kQK_K + j] = j == 40 ? -9.0f : j == 200 ? 9.0f : j / 64.0f;
    x[4 * kQK_K + j] = j == 250 ? 9.0f : j == 251 ? -9.0f : -j / 64.0f;
    x[5 * kQK_K + j] = j % 2 ? 127.0f : -0.5f - j;  // Sums near the limits.
  }
  std::vector<BlockQ8_K> a(kN / kQK_K), b(kN / kQK_K);
  internal::QuantizeRowQ8_KAvx2(x.data(), a.data(), kN);
  internal::QuantizeRowQ8_KScalar(x.data(), b.data(), kN);
  for (int64_t i = 0; i < kN / kQK_K; ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(BlockQ8_K)), 0) << i;
  }
  // The first of the largest magnitudes sets the sign (d = -max / 127):
  // block 3's -9, block 4's +9.
  EXPECT_GT(a[3].d, 0.0f);
  EXPECT_LT(a[4].d, 0.0f);
}

}  // namespace
}  // namespace braid::kernels::cpu
