// The CUDA attention's launch planning (attention_plan.h), on the host.
#include "kernels/cuda/attention_plan.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace braid::kernels::cuda {
namespace {

constexpr int kH100Sms = 132;

TEST(DecodeSplitsTest, SplitsFewLongContextsOnly) {
  // One decode sequence, 8 KV heads: 8 blocks on 132 SMs.
  EXPECT_EQ(DecodeSplits(4096, 8, kH100Sms), 16);  // 256 entries each
  EXPECT_EQ(DecodeSplits(5000, 8, kH100Sms), 20);
  EXPECT_EQ(DecodeSplits(100000, 8, kH100Sms), kMaxSplits);
  // A short context is not worth a combine pass.
  EXPECT_EQ(DecodeSplits(256, 8, kH100Sms), 1);
  EXPECT_EQ(DecodeSplits(257, 8, kH100Sms), 2);
  // 64 sequences x 8 KV heads: the GPU is busy without splitting.
  EXPECT_EQ(DecodeSplits(32768, 512, kH100Sms), 1);
  // 16 x 8: 528 / 128 = 4 splits.
  EXPECT_EQ(DecodeSplits(32768, 128, kH100Sms), 4);
  // Degenerate inputs.
  EXPECT_EQ(DecodeSplits(0, 8, kH100Sms), 1);
  EXPECT_EQ(DecodeSplits(4096, 0, kH100Sms), 1);
  EXPECT_EQ(DecodeSplits(4096, 8, 0), 1);
}

TEST(DecodeSplitsTest, BoundedAndMonotone) {
  for (int sms : {1, 46, 108, 132}) {
    for (int64_t work : {1, 2, 3, 7, 8, 32, 100, 263, 264, 1000, 100000}) {
      int previous = 1;
      for (int64_t ctx = 1; ctx <= 40000; ctx += 97) {
        const int s = DecodeSplits(ctx, work, sms);
        ASSERT_GE(s, 1);
        ASSERT_LE(s, kMaxSplits);
        ASSERT_GE(s, previous) << "not monotone in max_ctx at " << ctx;
        previous = s;
        if (s > 1) {
          ASSERT_LE(s * work, int64_t{kSplitBlocksPerSm} * sms);
          ASSERT_LE(s, (ctx + kMinSplitEntries - 1) / kMinSplitEntries);
          if (work > 1) {
            ASSERT_LE(s, DecodeSplits(ctx, work - 1, sms));
          }
        }
      }
    }
  }
}

TEST(PlanAttentionTest, ChoosesTheTileConfigurationByRows) {
  // GQA group 8: two tokens of a sequence fill one warp's 16 rows.
  AttentionPlan p = PlanAttention(1, 8, 8, 2, 4096, kH100Sms);
  EXPECT_TRUE(p.decode);
  EXPECT_EQ(p.block_rows, kDecodeBlockRows);
  EXPECT_EQ(p.q_tiles, 1);
  EXPECT_EQ(p.splits, 16);
  p = PlanAttention(1, 8, 8, 3, 4096, kH100Sms);
  EXPECT_FALSE(p.decode);
  EXPECT_EQ(p.block_rows, kPrefillBlockRows);
  EXPECT_EQ(p.q_tiles, 1);
  // A 512-token prompt chunk, group 4: 2048 rows in 32 tiles, 256 blocks
  // with 8 KV heads: split in 2 over a long context, not over a short one.
  p = PlanAttention(1, 8, 4, 512, 8192, kH100Sms);
  EXPECT_FALSE(p.decode);
  EXPECT_EQ(p.q_tiles, 32);
  EXPECT_EQ(p.splits, 2);
  EXPECT_EQ(PlanAttention(1, 8, 4, 512, 512, kH100Sms).splits, 2);
  EXPECT_EQ(PlanAttention(1, 8, 4, 512, 256, kH100Sms).splits, 1);
  // No grouping: 16 tokens still decode.
  p = PlanAttention(4, 32, 1, 16, 100, kH100Sms);
  EXPECT_TRUE(p.decode);
  EXPECT_EQ(p.q_tiles, 1);
  EXPECT_EQ(p.splits, 1);
  // No query tokens: nothing to launch.
  EXPECT_EQ(PlanAttention(3, 8, 4, 0, 100, kH100Sms).q_tiles, 0);
}

TEST(PlanAttentionTest, WorkspaceFitsTheBound) {
  for (int head_dim : {64, 128, 256}) {
    const size_t bound = MaxWorkspaceBytes(head_dim, kH100Sms);
    for (int n_seq : {1, 2, 5, 16, 64, 256}) {
      for (int n_kv_head : {1, 2, 8, 32}) {
        for (int group : {1, 4, 8}) {
          for (int tokens : {1, 2, 4, 16, 100, 2048}) {
            for (int ctx : {1, 300, 4096, 131072}) {
              const AttentionPlan p =
                  PlanAttention(n_seq, n_kv_head, group, tokens, ctx, kH100Sms);
              const size_t bytes =
                  PlanWorkspaceBytes(p, n_seq, n_kv_head, head_dim);
              ASSERT_LE(bytes, bound);
              ASSERT_EQ(bytes == 0, p.splits == 1);
              if (p.splits > 1) {
                ASSERT_EQ(bytes, p.splits * PartialRows(p, n_seq, n_kv_head) *
                                     (head_dim + 1) * sizeof(float));
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::kernels::cuda
