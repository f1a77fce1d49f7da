#include "kernels/cpu/fp16.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace braid::kernels::cpu {
namespace {

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_TRUE(std::isinf(Fp16ToFp32(0x7C00)));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7E00)));
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(1e6f), 0x7C00);  // Overflow -> inf.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // Tie to even.
}

TEST(Fp16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(Fp16Test, RowPathsAgreeWithScalar) {
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> fast(halves.size()), slow(halves.size());
  Fp16ToFp32Row(halves.data(), fast.data(), halves.size());
  SetForceScalarForTesting(true);
  Fp16ToFp32Row(halves.data(), slow.data(), halves.size());
  SetForceScalarForTesting(false);
  for (size_t i = 0; i < halves.size(); ++i) {
    if (std::isnan(slow[i])) continue;
    ASSERT_EQ(fast[i], slow[i]) << i;
  }
  std::vector<float> xs;
  for (int i = -2000; i < 2000; ++i) xs.push_back(i * 0.37f + 1e-3f * i * i);
  std::vector<uint16_t> a(xs.size()), b(xs.size());
  Fp32ToFp16Row(xs.data(), a.data(), xs.size());
  SetForceScalarForTesting(true);
  Fp32ToFp16Row(xs.data(), b.data(), xs.size());
  SetForceScalarForTesting(false);
  EXPECT_EQ(a, b);
}

// RoundToFp16Row (F16C) equals the scalar round trip on normal, subnormal,
// tie, overflow and zero values, and in place.
TEST(Fp16Test, RoundToFp16RowAgreesWithScalar) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1e-8f,
                           -3e-7f,
                           6.1e-5f,
                           65504.0f,
                           65520.0f,
                           1e6f,
                           -1e6f,
                           1.0f + std::ldexp(1.0f, -11),
                           std::ldexp(1.0f, -25),
                           INFINITY,
                           -INFINITY};
  for (int i = -3000; i < 3000; ++i) {
    xs.push_back(std::ldexp(1.0f + i * 1.37e-4f, i % 40 - 28));
  }
  std::vector<float> fast(xs.size());
  RoundToFp16Row(xs.data(), fast.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(fast[i], Fp16ToFp32(Fp32ToFp16(xs[i]))) << xs[i];
  }
  std::vector<float> in_place = xs;
  RoundToFp16Row(in_place.data(), in_place.data(), in_place.size());
  EXPECT_EQ(in_place, fast);
  SetForceScalarForTesting(true);
  std::vector<float> slow(xs.size());
  RoundToFp16Row(xs.data(), slow.data(), xs.size());
  SetForceScalarForTesting(false);
  EXPECT_EQ(slow, fast);
}

TEST(Bf16Test, ConvertsAndRounds) {
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(1.00390625f), 0x3F80);  // Tie to even, down.
  EXPECT_EQ(Fp32ToBf16(1.01171875f), 0x3F82);  // Tie to even, up.
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(NAN))));
  std::vector<uint16_t> in = {0x3F80, 0xC000, 0x0000};
  std::vector<float> out(3);
  Bf16ToFp32Row(in.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.0f}));
}

}  // namespace
}  // namespace braid::kernels::cpu
