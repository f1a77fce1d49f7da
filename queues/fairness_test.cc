// The real scheduler with streams/' queue policies, step by step: which
// request's prompt each step serves when a heavy tenant queued first.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "batching/scheduler.h"
#include "batching/testing/single_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queues/work_queues.h"

namespace braid::queues {
namespace {

using batching::Scheduler;
using batching::SchedulerOptions;
using batching::StepPlan;

struct Submission {
  std::string name;
  std::string tenant;
  int priority = 0;
};

// Every prompt is one step's budget (8 tokens); each request finishes as
// soon as its prompt is done. Returns the names in the order served.
std::vector<std::string> ServeOrder(QueuePolicy policy,
                                    const std::vector<Submission>& subs) {
  SchedulerOptions o;
  o.num_blocks = 64;
  o.block_size = 4;
  o.max_batch_tokens = 8;
  o.max_num_seqs = 8;
  Scheduler s(o, MakeWorkQueues(policy));
  batching::testing::SingleStreamRequests requests(s);
  std::map<uint64_t, std::string> names;
  int32_t first = 1;
  for (size_t i = 0; i < subs.size(); ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 8; ++t) prompt.push_back(first++);
    names[i + 1] = subs[i].name;
    requests.Add(i + 1, prompt, subs[i].priority, subs[i].tenant);
  }
  std::vector<std::string> order;
  for (int step = 0; step < 20 && s.stats().num_requests > 0; ++step) {
    StepPlan plan = s.Schedule();
    std::vector<std::string> served;
    for (const auto& seq : plan.sequences)
      served.push_back(names[seq.request_id]);
    order.push_back(absl::StrJoin(served, "+"));
    s.Update(plan);
    for (const auto& seq : plan.sequences) {
      if (!seq.samples.empty()) s.Remove(seq.request_id);
    }
  }
  return order;
}

const std::vector<Submission> kHeavyThenLight = {{"a1", "a"}, {"a2", "a"},
                                                 {"a3", "a"}, {"a4", "a"},
                                                 {"b1", "b"}, {"b2", "b"}};

TEST(FairnessTest, FifoServesInArrivalOrder) {
  EXPECT_THAT(ServeOrder(QueuePolicy::kFifo, kHeavyThenLight),
              ::testing::ElementsAre("a1", "a2", "a3", "a4", "b1", "b2"));
}

TEST(FairnessTest, FairShareAlternatesTenants) {
  EXPECT_THAT(ServeOrder(QueuePolicy::kFairShare, kHeavyThenLight),
              ::testing::ElementsAre("a1", "b1", "a2", "b2", "a3", "a4"));
}

TEST(FairnessTest, PriorityComesBeforeFairShareAndArrival) {
  std::vector<Submission> subs = kHeavyThenLight;
  subs.push_back({"urgent", "c", 5});
  EXPECT_THAT(
      ServeOrder(QueuePolicy::kFairShare, subs),
      ::testing::ElementsAre("urgent", "a1", "b1", "a2", "b2", "a3", "a4"));
  EXPECT_THAT(
      ServeOrder(QueuePolicy::kPriority, subs),
      ::testing::ElementsAre("urgent", "a1", "a2", "a3", "a4", "b1", "b2"));
}

}  // namespace
}  // namespace braid::queues
