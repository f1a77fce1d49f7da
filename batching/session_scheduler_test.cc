// The scheduler's session support: entries with (stream, y) tags, lockstep
// sample points, sees(s) in the plan, blocks released on Remove.
#include <vector>

#include "batching/scheduler.h"
#include "batching/testing/fifo_queue.h"
#include "gtest/gtest.h"

namespace braid::batching {
namespace {

SchedulerOptions Options() {
  SchedulerOptions o;
  o.num_blocks = 16;
  o.block_size = 4;
  o.max_batch_tokens = 64;
  o.max_num_seqs = 4;
  return o;
}

std::vector<EntryTag> Tags(int stream, int y0, int n) {
  std::vector<EntryTag> t;
  for (int i = 0; i < n; ++i) t.push_back({stream, y0 + i});
  return t;
}

TEST(SessionSchedulerTest, PrefixThenLockstepDecode) {
  Scheduler s(Options(), testing::FifoQueues());
  s.AddSession(7, {1, 2, 3, 4, 5}, Tags(0, 0, 5), {{}, {0}, {0}}, 0, "");
  const SamplePoint first[] = {{4, 1, nullptr}, {4, 2, nullptr}};
  s.AddSamplePoints(7, first);
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.sequences.size(), 1u);
  EXPECT_EQ(p.sequences[0].tokens.size(), 5u);
  ASSERT_EQ(p.sequences[0].samples.size(), 2u);
  EXPECT_EQ(p.sequences[0].samples[0].index, 4);
  EXPECT_EQ(p.sequences[0].sees[1], std::vector<int32_t>{0});
  StepOutput out;
  out.tokens.resize(1);
  out.stream_tokens.resize(1);
  s.Update(p, out);
  EXPECT_EQ(s.num_computed_tokens(7), 5);
  // Both branches write at y = 5: two entries, both sampled in one step.
  const int32_t toks[] = {10, 11};
  const EntryTag tags[] = {{1, 5}, {2, 5}};
  s.AppendEntries(7, toks, tags);
  const SamplePoint next[] = {{5, 1, nullptr}, {6, 2, nullptr}};
  s.AddSamplePoints(7, next);
  p = s.Schedule();
  ASSERT_EQ(p.sequences.size(), 1u);
  EXPECT_EQ(p.sequences[0].num_cached, 5);
  EXPECT_EQ(p.sequences[0].tokens.size(), 2u);
  EXPECT_EQ(p.sequences[0].meta[1].stream, 2);
  EXPECT_EQ(p.sequences[0].samples.size(), 2u);
  EXPECT_EQ(p.sequences[0].block_table.size(), 2u);  // 7 entries, 4 per block
  s.Update(p, out);
  // Nothing left: an idle session is not scheduled but keeps its blocks.
  EXPECT_TRUE(s.Schedule().empty());
  EXPECT_EQ(s.stats().blocks.num_free_blocks, 14);
  s.Remove(7);
  EXPECT_EQ(s.stats().blocks.num_free_blocks, 16);
}

TEST(SessionSchedulerTest, ChunkNeverSplitsTheSamplePoints) {
  SchedulerOptions o = Options();
  o.max_batch_tokens = 6;
  Scheduler s(o, testing::FifoQueues());
  s.AddSession(1, {1, 2, 3, 4}, Tags(0, 0, 4), {{}, {0}, {0}}, 0, "");
  StepPlan p = s.Schedule();
  StepOutput out;
  out.tokens.resize(1);
  out.stream_tokens.resize(1);
  s.Update(p, out);
  // Input of 3, then two streams' points at entries 6 and 8 (after input).
  const int32_t toks[] = {5, 6, 7, 8, 9};
  const EntryTag tags[] = {{3, 4}, {3, 5}, {1, 6}, {3, 6}, {2, 6}};
  s.AppendEntries(1, toks, tags);
  const SamplePoint pts[] = {{6, 1, nullptr}, {8, 2, nullptr}};
  s.AddSamplePoints(1, pts);
  // Budget 6 but the queue shares give the prompt queue less: the chunk
  // stops before entry 6 or covers 6..8.
  p = s.Schedule();
  ASSERT_EQ(p.sequences.size(), 1u);
  const int n = static_cast<int>(p.sequences[0].tokens.size());
  EXPECT_TRUE(n <= 2 || n == 5) << n;
}

}  // namespace
}  // namespace braid::batching
