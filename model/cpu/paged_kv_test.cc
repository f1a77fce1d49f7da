#include "model/cpu/paged_kv.h"

#include "gtest/gtest.h"

namespace braid::model {
namespace {

TEST(PagedKvPoolTest, ShapeAndDisjointBlocks) {
  PagedKvPool pool(/*n_layer=*/3, /*kv_dim=*/8, /*block_size=*/4,
                   /*num_blocks=*/5);
  EXPECT_EQ(pool.n_layer(), 3);
  EXPECT_EQ(pool.kv_dim(), 8);
  EXPECT_EQ(pool.block_size(), 4);
  EXPECT_EQ(pool.num_blocks(), 5);
  // K + V: 3 layers x 5 blocks x 4 slots x 8 x 2 bytes each, plus 8-byte meta.
  EXPECT_EQ(pool.bytes(), 2 * 3 * 5 * 4 * 8 * 2 + 5 * 4 * 8);
  // Blocks of a layer are contiguous and layers follow each other.
  EXPECT_EQ(pool.k(0, 1) - pool.k(0, 0), 4 * 8);
  EXPECT_EQ(pool.k(1, 0) - pool.k(0, 0), 5 * 4 * 8);
  EXPECT_EQ(pool.v(2, 4) - pool.v(0, 0), (2 * 5 + 4) * 4 * 8);
  EXPECT_EQ(pool.meta(3) - pool.meta(0), 3 * 4);
  // Writes to one block leave the others alone; K and V are separate.
  for (int i = 0; i < 4 * 8; ++i) pool.k(1, 2)[i] = 7;
  pool.meta(2)[1] = KvEntryMeta{1, 9};
  EXPECT_EQ(pool.k(1, 1)[4 * 8 - 1], 0);
  EXPECT_EQ(pool.k(1, 3)[0], 0);
  EXPECT_EQ(pool.v(1, 2)[0], 0);
  EXPECT_EQ(pool.k(0, 2)[0], 0);
  EXPECT_EQ(pool.meta(2)[1].stream, 1);
  EXPECT_EQ(pool.meta(2)[1].y, 9);
  EXPECT_EQ(pool.meta(2)[0].y, 0);
}

TEST(PagedKvPoolTest, BlocksForBudget) {
  const int64_t block_bytes = (2 * 30 * 192 * 2 + 8) * 16;
  EXPECT_EQ(PagedKvPool::BlocksForBudget(30, 192, 16, 10 * block_bytes), 10);
  EXPECT_EQ(PagedKvPool::BlocksForBudget(30, 192, 16, 10 * block_bytes - 1), 9);
  EXPECT_EQ(PagedKvPool::BlocksForBudget(30, 192, 16, block_bytes - 1), 0);
  EXPECT_EQ(PagedKvPool::BlocksForBudget(30, 192, 16, 0), 0);
  EXPECT_EQ(PagedKvPool::BlocksForBudget(0, 192, 16, 1 << 30), 0);
  PagedKvPool pool(30, 192, 16, 10);
  EXPECT_EQ(pool.bytes(), 10 * block_bytes);
}

}  // namespace
}  // namespace braid::model
