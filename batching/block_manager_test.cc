#include "batching/block_manager.h"

#include <vector>

#include "gtest/gtest.h"

namespace braid::batching {
namespace {

std::vector<int32_t> Seq(int n, int32_t first) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(BlockManagerTest, AllocatesAndReleases) {
  BlockManager m(4, 16);
  std::vector<int32_t> a, b;
  EXPECT_TRUE(m.Allocate(3, &a));
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_FALSE(m.Allocate(2, &b));  // all or nothing
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(m.num_free_blocks(), 1);
  m.Release(a);
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_TRUE(m.Allocate(4, &b));
}

TEST(BlockManagerTest, SharedBlocksAreFreedByTheLastHolder) {
  BlockManager m(4, 2);
  std::vector<int32_t> a, hashes;
  std::vector<uint64_t> h;
  ASSERT_TRUE(m.Allocate(2, &a));
  const std::vector<int32_t> tokens = Seq(4, 1);
  const uint64_t h0 = m.Commit(a[0], BlockManager::kRootHash,
                               absl::MakeConstSpan(tokens).subspan(0, 2));
  m.Commit(a[1], h0, absl::MakeConstSpan(tokens).subspan(2, 2));
  std::vector<int32_t> b;
  EXPECT_EQ(m.AcquireCachedPrefix(tokens, 2, &b, &h), 2);
  EXPECT_EQ(b, a);
  EXPECT_EQ(m.ref_count(a[0]), 2);
  m.Release(a);
  EXPECT_EQ(m.num_free_blocks(), 2);
  m.Release(b);
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_EQ(m.stats().num_cached_blocks, 2);  // free but still findable
}

TEST(BlockManagerTest, PrefixLookupStopsAtTheFirstDifference) {
  BlockManager m(8, 2);
  std::vector<int32_t> a;
  ASSERT_TRUE(m.Allocate(3, &a));
  const std::vector<int32_t> tokens = Seq(6, 1);
  uint64_t parent = BlockManager::kRootHash;
  for (int i = 0; i < 3; ++i) {
    parent =
        m.Commit(a[i], parent, absl::MakeConstSpan(tokens).subspan(2 * i, 2));
  }
  std::vector<int32_t> other = tokens;
  other[3] = 99;  // second block differs
  std::vector<int32_t> b;
  std::vector<uint64_t> h;
  EXPECT_EQ(m.AcquireCachedPrefix(other, 3, &b, &h), 1);
  // A later block with equal tokens but another prefix is not a hit.
  std::vector<int32_t> shifted = {7, 7, 5, 6};
  b.clear();
  EXPECT_EQ(m.AcquireCachedPrefix(shifted, 2, &b, &h), 0);
  // max_blocks caps the hit.
  b.clear();
  EXPECT_EQ(m.AcquireCachedPrefix(tokens, 2, &b, &h), 2);
}

TEST(BlockManagerTest, EvictsLeastRecentlyReleasedCachedBlocksLast) {
  BlockManager m(3, 1);
  std::vector<int32_t> x, y;
  ASSERT_TRUE(m.Allocate(1, &x));
  ASSERT_TRUE(m.Allocate(1, &y));
  const std::vector<int32_t> tx = {5}, ty = {6};
  m.Commit(x[0], BlockManager::kRootHash, tx);
  m.Commit(y[0], BlockManager::kRootHash, ty);
  m.Release(x);  // older
  m.Release(y);
  // The never-cached block goes first, then x (released first), then y.
  std::vector<int32_t> n;
  ASSERT_TRUE(m.Allocate(1, &n));
  EXPECT_EQ(m.stats().num_cached_blocks, 2);
  ASSERT_TRUE(m.Allocate(1, &n));
  EXPECT_EQ(n.back(), x[0]);
  EXPECT_EQ(m.stats().num_evictions, 1);
  std::vector<int32_t> hit;
  std::vector<uint64_t> h;
  EXPECT_EQ(m.AcquireCachedPrefix(tx, 1, &hit, &h), 0);
  EXPECT_EQ(m.AcquireCachedPrefix(ty, 1, &hit, &h), 1);
  EXPECT_EQ(m.num_free_blocks(), 0);
}

TEST(BlockManagerTest, IdenticalContentInTwoBlocksKeepsOneCachedCopy) {
  BlockManager m(2, 2);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(m.Allocate(1, &a));
  ASSERT_TRUE(m.Allocate(1, &b));
  const std::vector<int32_t> t = {1, 2};
  const uint64_t ha = m.Commit(a[0], BlockManager::kRootHash, t);
  EXPECT_EQ(m.Commit(b[0], BlockManager::kRootHash, t), ha);
  EXPECT_EQ(m.stats().num_cached_blocks, 1);
  m.Release(a);
  m.Release(b);
  EXPECT_EQ(m.num_free_blocks(), 2);
}

// Blocks keyed by more than their tokens (a kept session's; Scheduler::Keep):
// found by the whole key, shared when full, taken whole when partial.
TEST(BlockManagerTest, KeyedBlocksAreSharedOrTakenWhole) {
  BlockManager m(4, 2);
  std::vector<int32_t> a;
  ASSERT_TRUE(m.Allocate(2, &a));
  const std::vector<int32_t> full = {2, 7, 8, 1, 0, 1, 1};  // any length
  const std::vector<int32_t> tail = {1, 9, 1, 2};
  const uint64_t h = m.Commit(a[0], BlockManager::kRootHash, full);
  m.Commit(a[1], h, tail);
  m.Release(a);
  EXPECT_EQ(m.num_free_blocks(), 4);
  uint64_t got = 0;
  std::vector<int32_t> other = full;
  other.back() = 2;  // another (stream, y) tag: no hit
  EXPECT_EQ(m.AcquireCached(BlockManager::kRootHash, other, &got), -1);
  EXPECT_EQ(m.AcquireCached(BlockManager::kRootHash, full, &got), a[0]);
  EXPECT_EQ(got, h);
  EXPECT_EQ(m.ref_count(a[0]), 1);
  // The plain-token lookup never matches a keyed block.
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;
  EXPECT_EQ(m.AcquireCachedPrefix({2, 7}, 1, &blocks, &hashes), 0);
  EXPECT_EQ(m.TakeCached(BlockManager::kRootHash, tail), -1);  // wrong parent
  // Taken: held by the taker alone and gone from the cache.
  EXPECT_EQ(m.TakeCached(h, tail), a[1]);
  EXPECT_EQ(m.ref_count(a[1]), 1);
  EXPECT_EQ(m.stats().num_cached_blocks, 1);
  EXPECT_EQ(m.TakeCached(h, tail), -1);
  // A referenced block is never taken.
  EXPECT_EQ(m.TakeCached(BlockManager::kRootHash, full), -1);
  m.Release({a[0], a[1]});
  EXPECT_EQ(m.num_free_blocks(), 4);
}

}  // namespace
}  // namespace braid::batching
