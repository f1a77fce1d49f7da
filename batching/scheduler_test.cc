// The scheduler driven step by step, with no model: each test is a table of
// (requests joining, expected plan) rows. A plan renders as
//   "A:prompt+8 B:io+1* | preempt C"
// (request, queue that granted the work, tokens computed, * = samples).
#include "batching/scheduler.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/single_stream.h"
#include "gtest/gtest.h"

namespace braid::batching {
namespace {

constexpr int32_t kThinkStart = 100;
constexpr int32_t kThinkEnd = 101;

std::vector<int32_t> Tokens(int n, int32_t first = 1) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

class Harness {
 public:
  explicit Harness(SchedulerOptions options)
      : scheduler_(options, testing::FifoQueues()),
        requests_(scheduler_, kThinkStart, kThinkEnd) {}

  void Add(const std::string& name, std::vector<int32_t> prompt,
           int priority = 0) {
    const uint64_t id = next_id_++;
    ids_[name] = id;
    names_[id] = name;
    requests_.Add(id, std::move(prompt), priority);
  }
  void Remove(const std::string& name) { scheduler_.Remove(ids_.at(name)); }

  // Plans one step, renders it, and applies it; every sampled sequence gets
  // token 7 unless `next` names another.
  std::string Step(const std::map<std::string, int32_t>& next = {}) {
    StepPlan plan = scheduler_.Schedule();
    std::vector<std::string> parts;
    StepOutput out;
    for (const ScheduledSequence& s : plan.sequences) {
      const std::string& name = names_.at(s.request_id);
      kernel_tokens_[name] = s.kernel_tokens;
      parts.push_back(absl::StrCat(name, ":", QueueName(s.queue), "+",
                                   s.tokens.size(),
                                   s.samples.empty() ? "" : "*"));
      SampledToken t;
      t.token_id = next.count(name) ? next.at(name) : 7;
      out.tokens.push_back({t});
    }
    std::string text = absl::StrJoin(parts, " ");
    if (!plan.preempted.empty()) {
      std::vector<std::string> p;
      for (uint64_t id : plan.preempted) p.push_back(names_.at(id));
      absl::StrAppend(&text, " | preempt ", absl::StrJoin(p, " "));
    }
    scheduler_.Update(plan);
    requests_.Append(plan, out);
    return text;
  }

  Scheduler& scheduler() { return scheduler_; }
  uint64_t id(const std::string& name) const { return ids_.at(name); }
  // ScheduledSequence::kernel_tokens of `name` in the last step it ran.
  int kernel_tokens(const std::string& name) const {
    return kernel_tokens_.at(name);
  }

 private:
  Scheduler scheduler_;
  testing::SingleStreamRequests requests_;
  uint64_t next_id_ = 1;
  std::map<std::string, uint64_t> ids_;
  std::map<uint64_t, std::string> names_;
  std::map<std::string, int> kernel_tokens_;
};

struct Row {
  std::vector<std::pair<std::string, int>> add;  // name, prompt length
  std::string plan;
};

// Prompts of distinct tokens, so no prefix is shared by accident.
void RunTable(Harness& h, const std::vector<Row>& rows) {
  int32_t first = 1000;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const auto& [name, len] : rows[i].add) {
      h.Add(name, Tokens(len, first));
      first += 1000;
    }
    EXPECT_EQ(h.Step(), rows[i].plan) << "step " << i + 1;
  }
}

SchedulerOptions Small() {
  SchedulerOptions o;
  o.num_blocks = 64;
  o.block_size = 4;
  o.max_batch_tokens = 8;
  o.max_num_seqs = 4;
  return o;
}

TEST(SchedulerTest, ChunksLongPromptsAndJoinsBetweenSteps) {
  Harness h(Small());
  RunTable(h, {
                  {{{"A", 20}}, "A:prompt+8"},
                  {{}, "A:prompt+8"},
                  // B joins; A's last chunk and B's first share the step.
                  {{{"B", 6}}, "A:prompt+4* B:prompt+4"},
                  {{}, "A:io+1* B:prompt+2*"},
                  {{}, "A:io+1* B:io+1*"},
              });
  EXPECT_EQ(h.scheduler().tokens(h.id("A")).size(), 20u + 3);
  EXPECT_EQ(h.scheduler().num_computed_tokens(h.id("A")), 22);
}

// Stream isolation: while A decodes, B's long prompt joins each step with at
// most max_prefill_tokens_while_decoding tokens; alone, it gets the budget.
TEST(SchedulerTest, CapsPrefillWhileOthersDecode) {
  SchedulerOptions o = Small();
  o.max_prefill_tokens_while_decoding = 3;
  o.prefill_tokens_per_decode_token = 1;  // one decode token: the floor wins
  Harness h(o);
  RunTable(h, {
                  {{{"A", 2}}, "A:prompt+2*"},
                  {{{"B", 12}}, "A:io+1* B:prompt+3"},
                  {{}, "A:io+1* B:prompt+3"},
              });
  h.Remove("A");
  RunTable(h, {{{}, "B:prompt+6*"}});
}

// With more decode tokens in the step, the prefill allowance grows with them.
TEST(SchedulerTest, PrefillAllowanceScalesWithDecodeTokens) {
  SchedulerOptions o = Small();
  o.max_batch_tokens = 16;
  o.queue_shares = {0.5, 0.0, 0.5};
  o.max_prefill_tokens_while_decoding = 2;
  o.prefill_tokens_per_decode_token = 2;
  Harness h(o);
  RunTable(h, {
                  {{{"A", 2}, {"B", 2}, {"C", 2}},
                   "A:prompt+2* B:prompt+2* C:prompt+2*"},
                  // Three decode tokens allow six prefill tokens (C's decode
                  // comes in the second pass, after D's first grant of 4).
                  {{{"D", 20}}, "A:io+1* B:io+1* D:prompt+6 C:io+1*"},
              });
}

// The paced cap (measured step times, PrefillPacer) lowers the static
// allowance while others decode, works with the static limit off, and does
// not touch prompts that run alone.
TEST(SchedulerTest, PacedCapLimitsPrefillWhileOthersDecode) {
  SchedulerOptions o = Small();
  o.max_prefill_tokens_while_decoding = 6;
  Harness h(o);
  RunTable(h, {
                  {{{"A", 2}}, "A:prompt+2*"},
                  {{{"B", 30}}, "A:io+1* B:prompt+6"},
              });
  h.scheduler().SetPacedPrefillCap(2);
  RunTable(h, {{{}, "A:io+1* B:prompt+2"}});
  h.scheduler().SetPacedPrefillCap(-1);  // a probe: no prefill
  RunTable(h, {{{}, "A:io+1*"}});
  h.scheduler().SetPacedPrefillCap(0);
  RunTable(h, {{{}, "A:io+1* B:prompt+6"}});
  h.Remove("A");
  h.scheduler().SetPacedPrefillCap(2);
  RunTable(h, {{{}, "B:prompt+8"}});  // alone: the whole budget

  SchedulerOptions off = Small();
  off.max_prefill_tokens_while_decoding = 0;
  Harness g(off);
  g.scheduler().SetPacedPrefillCap(3);
  RunTable(g, {
                  {{{"A", 2}}, "A:prompt+2*"},
                  {{{"B", 30}}, "A:io+1* B:prompt+3"},
              });
}

TEST(SchedulerTest, RequestsLeaveBetweenSteps) {
  Harness h(Small());
  RunTable(h, {{{{"A", 2}, {"B", 2}}, "A:prompt+2* B:prompt+2*"}});
  h.Remove("A");
  RunTable(h, {{{}, "B:io+1*"}});
  h.Remove("B");
  EXPECT_EQ(h.Step(), "");
  EXPECT_EQ(h.scheduler().stats().blocks.num_free_blocks, 64);
}

// Budget of 8 tokens split 4 / 2 / 2 (I/O, reasoning, prompt): with every
// queue busy each gets its share; none starves the prompt queue.
TEST(SchedulerTest, SplitsTheBudgetAcrossQueues) {
  SchedulerOptions o = Small();
  o.max_num_seqs = 9;
  Harness h(o);
  for (const char* name : {"I1", "I2", "I3", "I4", "I5"}) h.Add(name, {1});
  for (const char* name : {"R1", "R2", "R3"}) h.Add(name, {kThinkStart});
  EXPECT_EQ(h.Step(),
            "I1:prompt+1* I2:prompt+1* I3:prompt+1* I4:prompt+1* I5:prompt+1* "
            "R1:prompt+1* R2:prompt+1* R3:prompt+1*");
  // Prompt queue idle: its share goes to the other queues.
  EXPECT_EQ(h.Step(),
            "I1:io+1* I2:io+1* I3:io+1* I4:io+1* R1:reasoning+1* "
            "R2:reasoning+1* I5:io+1* R3:reasoning+1*");
  h.Add("P", Tokens(30));
  EXPECT_EQ(h.Step(),
            "I1:io+1* I2:io+1* I3:io+1* I4:io+1* R1:reasoning+1* "
            "R2:reasoning+1* P:prompt+2");
}

// Decode work moves between the reasoning and I/O queues at the markers.
TEST(SchedulerTest, ThinkingMarkersMoveWorkBetweenQueues) {
  Harness h(Small());
  h.Add("A", {1, 2, kThinkStart});
  EXPECT_EQ(h.Step(), "A:prompt+3*");
  EXPECT_EQ(h.scheduler().queue(h.id("A")), QueueKind::kReasoning);
  EXPECT_EQ(h.Step({{"A", kThinkEnd}}), "A:reasoning+1*");
  EXPECT_EQ(h.scheduler().queue(h.id("A")), QueueKind::kIo);
  EXPECT_EQ(h.Step({{"A", kThinkStart}}), "A:io+1*");
  EXPECT_EQ(h.Step(), "A:reasoning+1*");
}

// Pool of 5 blocks of 4 tokens. When a decode needs a block, the work that
// ranks lowest (lower priority, then most recently admitted) is preempted.
TEST(SchedulerTest, PreemptsLowestPriorityMostRecentlyAdmittedFirst) {
  SchedulerOptions o = Small();
  o.num_blocks = 5;
  o.max_batch_tokens = 16;
  Harness h(o);
  h.Add("A", Tokens(4), /*priority=*/0);
  h.Add("B", Tokens(4, 10), /*priority=*/1);
  h.Add("C", Tokens(4, 20), /*priority=*/0);
  EXPECT_EQ(h.Step(), "A:prompt+4* B:prompt+4* C:prompt+4*");
  // A and B take the last free blocks; C needs one and ranks lowest
  // (priority 0, admitted after A): C goes.
  EXPECT_EQ(h.Step(), "A:io+1* B:io+1* | preempt C");
  EXPECT_EQ(h.scheduler().queue(h.id("C")), QueueKind::kPrompt);
  EXPECT_EQ(h.scheduler().num_computed_tokens(h.id("C")), 0);
  // C cannot come back while A and B fill the pool (it would leave no
  // block for their next ones).
  EXPECT_EQ(h.Step(), "A:io+1* B:io+1*");
  EXPECT_EQ(h.Step(), "A:io+1* B:io+1*");
  EXPECT_EQ(h.Step(), "A:io+1* B:io+1*");
  // Both need a third block and one is free: A takes it, B needs one too
  // and A ranks below B, so A goes; C re-enters with what leaves a block
  // for B (a partial chunk).
  EXPECT_EQ(h.Step(), "B:io+1* C:prompt+4 | preempt A");
  EXPECT_EQ(h.scheduler().stats().num_preemptions, 2);
  EXPECT_EQ(h.scheduler().num_preemptions(h.id("A")), 1);
  EXPECT_EQ(h.scheduler().num_preemptions(h.id("C")), 1);
}

// A new request is admitted with what leaves one free block for each
// request already running (the next block its decoding needs), so it is
// not preempted again a few steps later; later new requests wait in order.
TEST(SchedulerTest, NewRequestsWaitForBlocksInOrder) {
  SchedulerOptions o = Small();
  o.num_blocks = 4;
  o.max_batch_tokens = 16;
  Harness h(o);
  h.Add("A", Tokens(8));
  h.Add("B", Tokens(8, 20));
  h.Add("C", Tokens(2, 40));
  // B gets one block's worth (a partial chunk: one block stays free for A);
  // C, admitted later, waits.
  EXPECT_EQ(h.Step(), "A:prompt+8* B:prompt+4");
  h.Remove("A");
  EXPECT_EQ(h.Step(), "B:prompt+4* C:prompt+2*");
}

// With lookahead_slots, a decoding request's blocks cover the entry after
// its step too (a block early at each boundary), from free blocks only:
// never by preempting, never from admission's reserve; all return when it
// leaves.
TEST(SchedulerTest, LookaheadSlotsTakeTheNextBlockEarlyWhenFree) {
  SchedulerOptions o = Small();
  o.lookahead_slots = 1;
  Harness h(o);
  h.Add("A", Tokens(7));
  EXPECT_EQ(h.Step(), "A:prompt+7*");  // entries 0..6: 2 blocks, no lookahead
  EXPECT_EQ(h.scheduler().block_table(h.id("A")).size(), 2u);
  EXPECT_EQ(h.Step(), "A:io+1*");  // entry 7; entry 8 needs a third block
  EXPECT_EQ(h.scheduler().block_table(h.id("A")).size(), 3u);
  EXPECT_EQ(h.Step(), "A:io+1*");  // entry 8 is in it already
  EXPECT_EQ(h.scheduler().block_table(h.id("A")).size(), 3u);
  h.Remove("A");
  EXPECT_EQ(h.scheduler().stats().blocks.num_free_blocks, 64);

  // Two blocks: the last free one is the reserve of the one running
  // request, not lookahead room; the step that needs it takes it.
  SchedulerOptions tight = Small();
  tight.lookahead_slots = 1;
  tight.num_blocks = 2;
  Harness t(tight);
  t.Add("B", Tokens(3));
  EXPECT_EQ(t.Step(), "B:prompt+3*");
  EXPECT_EQ(t.Step(), "B:io+1*");  // entry 3
  EXPECT_EQ(t.scheduler().block_table(t.id("B")).size(), 1u);
  EXPECT_EQ(t.Step(), "B:io+1*");  // entry 4
  EXPECT_EQ(t.scheduler().block_table(t.id("B")).size(), 2u);
}

// A second request with the same prefix takes its full blocks from the
// cache and computes only the rest.
TEST(SchedulerTest, ReusesCachedPrefixBlocks) {
  Harness h(Small());
  std::vector<int32_t> prefix = Tokens(10);
  h.Add("A", prefix);
  EXPECT_EQ(h.Step(), "A:prompt+8");
  EXPECT_EQ(h.Step(), "A:prompt+2*");
  h.Remove("A");  // its blocks stay cached while free
  std::vector<int32_t> longer = prefix;
  longer.push_back(99);
  h.Add("B", longer);
  // 8 of B's 11 tokens are two cached blocks.
  EXPECT_EQ(h.Step(), "B:prompt+3*");
  EXPECT_EQ(h.scheduler().stats().num_prefix_hit_tokens, 8);
  // An identical prompt still computes its last token (for its logits).
  h.Add("C", Tokens(8));
  EXPECT_EQ(h.Step(), "B:io+1* C:prompt+4*");
  EXPECT_EQ(h.scheduler().stats().num_prefix_hit_tokens, 12);
}

// Every entry keeps the attention kernels it was appended with: a prompt's
// chunks, down to a single token, the batched ones (kernel_tokens 2, so
// chunking never changes its bits), decode steps the one-token ones (1);
// after preemption the output tokens are recomputed apart from the prompt,
// with one-token kernels, as they were decoded.
TEST(SchedulerTest, ChunksKeepEntriesOnTheirKernels) {
  SchedulerOptions o = Small();
  Harness h(o);
  // 9 tokens with a budget of 8: 8 + 1, both chunks on the batched kernels.
  RunTable(h, {{{{"A", 9}}, "A:prompt+8"}});
  EXPECT_EQ(h.kernel_tokens("A"), 2);
  // (A lone last token waits in the I/O queue, like decode work.)
  RunTable(h, {{{}, "A:io+1*"}});
  EXPECT_EQ(h.kernel_tokens("A"), 2);
  RunTable(h, {{{}, "A:io+1*"}});
  EXPECT_EQ(h.kernel_tokens("A"), 1);

  o.num_blocks = 4;
  o.max_batch_tokens = 16;
  Harness p(o);
  p.Add("A", Tokens(4, 10), /*priority=*/1);
  p.Add("B", Tokens(2, 20));
  EXPECT_EQ(p.Step(), "A:prompt+4* B:prompt+2*");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.Step(), "A:io+1* B:io+1*");
  // A needs a block, B (priority 0) goes with 6 entries computed.
  EXPECT_EQ(p.Step(), "A:io+1* | preempt B");
  p.Remove("A");
  // B's first block (prompt + 2 outputs) comes back from the prefix cache;
  // entries 4 and 5, decoded tokens, and 6, the last sampled one, are
  // computed in one chunk with one-token kernels (each as it was or would
  // be decoded), which samples the next; then plain decode work again.
  EXPECT_EQ(p.Step(), "B:prompt+3*");
  EXPECT_EQ(p.kernel_tokens("B"), 1);
  EXPECT_EQ(p.scheduler().tokens(p.id("B")).size(), 2u + 6);
  EXPECT_EQ(p.Step(), "B:io+1*");
  EXPECT_EQ(p.scheduler().tokens(p.id("B")).size(), 2u + 7);
  EXPECT_EQ(p.scheduler().stats().num_prefix_hit_tokens, 4);
}

TEST(SchedulerTest, RejectsBadOptions) {
  SchedulerOptions o;
  o.queue_shares = {0.6, 0.3, 0.3};
  EXPECT_FALSE(o.Validate().ok());
  o = SchedulerOptions();
  o.max_batch_tokens = 0;
  EXPECT_FALSE(o.Validate().ok());
  EXPECT_TRUE(SchedulerOptions().Validate().ok());
}

}  // namespace
}  // namespace braid::batching
