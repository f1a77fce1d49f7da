#include "kernels/cuda/gemm_buckets.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::kernels::cuda {
namespace {

using ::testing::ElementsAre;

TEST(GemmBucketsTest, PowersOfTwoThenMultiplesOf64) {
  EXPECT_THAT(GemmBuckets(1), ElementsAre(1));
  EXPECT_THAT(GemmBuckets(6), ElementsAre(1, 2, 4, 6));
  EXPECT_THAT(GemmBuckets(64), ElementsAre(1, 2, 4, 8, 16, 32, 64));
  EXPECT_THAT(GemmBuckets(200),
              ElementsAre(1, 2, 4, 8, 16, 32, 64, 128, 192, 200));
  EXPECT_EQ(GemmBuckets(8192).size(), 6u + 128u);
}

TEST(GemmBucketsTest, EveryMRunsInTheSmallestBucketThatHoldsIt) {
  for (int max_m : {1, 2, 3, 6, 63, 64, 65, 127, 128, 200, 513, 2048}) {
    const std::vector<int> buckets = GemmBuckets(max_m);
    for (int m = 1; m <= max_m; ++m) {
      const int i = GemmBucketIndex(m, max_m);
      ASSERT_GE(i, 0);
      ASSERT_LT(i, static_cast<int>(buckets.size())) << m << " " << max_m;
      EXPECT_GE(buckets[i], m) << m << " " << max_m;
      if (i > 0) EXPECT_LT(buckets[i - 1], m) << m << " " << max_m;
    }
  }
}

}  // namespace
}  // namespace braid::kernels::cuda
