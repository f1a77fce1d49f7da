#include "kernels/cpu/cpu_features.h"

#include "gtest/gtest.h"

namespace braid::kernels::cpu {
namespace {

TEST(CpuFeaturesTest, ParsesIsaLevels) {
  IsaLevel level = IsaLevel::kNative;
  EXPECT_TRUE(ParseIsaLevel("scalar", &level));
  EXPECT_EQ(level, IsaLevel::kScalar);
  EXPECT_TRUE(ParseIsaLevel("avx2", &level));
  EXPECT_EQ(level, IsaLevel::kAvx2);
  for (const char* native : {"native", "avx512", ""}) {
    EXPECT_TRUE(ParseIsaLevel(native, &level)) << native;
    EXPECT_EQ(level, IsaLevel::kNative) << native;
  }
  EXPECT_FALSE(ParseIsaLevel("AVX2", &level));
  EXPECT_FALSE(ParseIsaLevel("sse4", &level));
}

TEST(CpuFeaturesTest, LevelsMaskFeatures) {
  CpuFeatures all;
  all.avx2 = all.fma = all.f16c = all.avx_vnni = all.avx512f = all.avx512bw =
      all.avx512vl = all.avx512dq = all.avx512_vnni = true;
  const CpuFeatures avx2 = LimitToIsaLevel(all, IsaLevel::kAvx2);
  EXPECT_TRUE(avx2.avx2 && avx2.fma && avx2.f16c);
  EXPECT_FALSE(avx2.avx_vnni || avx2.avx512f || avx2.avx512_vnni);
  const CpuFeatures scalar = LimitToIsaLevel(all, IsaLevel::kScalar);
  EXPECT_FALSE(scalar.avx2 || scalar.fma || scalar.avx512f);
  const CpuFeatures native = LimitToIsaLevel(all, IsaLevel::kNative);
  EXPECT_TRUE(native.avx512_vnni && native.avx_vnni);
}

}  // namespace
}  // namespace braid::kernels::cpu
