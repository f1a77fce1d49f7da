#include "model/kv_cache.h"

#include "gtest/gtest.h"

namespace braid::model {
namespace {

TEST(KvCacheTest, SizesAndTruncate) {
  KvCache kv(3, 10, 8);
  EXPECT_EQ(kv.size(), 0);
  EXPECT_EQ(kv.capacity(), 10);
  EXPECT_EQ(kv.k(1) - kv.k(0), 80);
  EXPECT_EQ(kv.v(2) - kv.v(0), 160);
  kv.set_size(7);
  kv.Truncate(9);
  EXPECT_EQ(kv.size(), 7);
  kv.Truncate(4);
  EXPECT_EQ(kv.size(), 4);
  kv.Truncate(-1);
  EXPECT_EQ(kv.size(), 0);
}

}  // namespace
}  // namespace braid::model
