// Generate-like requests over the scheduler alone, made as the engine makes
// them (batching/session.h): a session whose entries are stream 0 at
// y = context index, its next token sampled from its last entry, and each
// sampled token appended as the next entry. For scheduler tests without an
// engine (batching/scheduler_test.cc, queues/fairness_test.cc).
#ifndef BRAID_BATCHING_TESTING_SINGLE_STREAM_H_
#define BRAID_BATCHING_TESTING_SINGLE_STREAM_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "batching/scheduler.h"

namespace braid::batching::testing {

class SingleStreamRequests {
 public:
  // The output stream of every sample point (a Generate request's session
  // writes its one output stream, 1).
  static constexpr int32_t kStream = 1;

  // `think_start` / `think_end` (-1 = none): a request whose last marker is
  // the start decodes on the reasoning queue, as the engine's sessions say.
  explicit SingleStreamRequests(Scheduler& scheduler, int32_t think_start = -1,
                                int32_t think_end = -1)
      : scheduler_(scheduler),
        think_start_(think_start),
        think_end_(think_end) {}

  // A request whose (non-empty) prompt is its first entries.
  void Add(uint64_t id, std::vector<int32_t> prompt, int priority = 0,
           std::string tenant = "") {
    const int n = static_cast<int>(prompt.size());
    std::vector<EntryTag> meta(n);
    for (int i = 0; i < n; ++i) meta[i] = {0, i};
    bool& thinking = thinking_[id];
    for (int32_t t : prompt) Track(thinking, t);
    scheduler_.AddSession(id, std::move(prompt), std::move(meta), {{}},
                          priority, std::move(tenant));
    Sample(id, n - 1);
    scheduler_.SetSessionThinking(id, thinking);
  }

  // After Scheduler::Update(plan): each sequence that sampled and is still
  // there gets the first token of output.tokens[i] as its next entry, which
  // its next token is sampled from.
  void Append(const StepPlan& plan, const StepOutput& output) {
    for (size_t i = 0; i < plan.sequences.size(); ++i) {
      const uint64_t id = plan.sequences[i].request_id;
      if (plan.sequences[i].samples.empty() || !scheduler_.Contains(id) ||
          i >= output.tokens.size() || output.tokens[i].empty()) {
        continue;
      }
      const int32_t token = output.tokens[i][0].token_id;
      const int index = scheduler_.num_entries(id);
      const EntryTag tag{0, index};
      scheduler_.AppendEntries(id, absl::MakeConstSpan(&token, 1),
                               absl::MakeConstSpan(&tag, 1));
      Sample(id, index);
      bool& thinking = thinking_[id];
      Track(thinking, token);
      scheduler_.SetSessionThinking(id, thinking);
    }
  }

 private:
  void Track(bool& thinking, int32_t token) const {
    if (token == think_start_ && token >= 0) thinking = true;
    if (token == think_end_ && token >= 0) thinking = false;
  }
  void Sample(uint64_t id, int index) {
    const SamplePoint p{index, kStream};
    scheduler_.AddSamplePoints(id, absl::MakeConstSpan(&p, 1));
  }

  Scheduler& scheduler_;
  const int32_t think_start_;
  const int32_t think_end_;
  std::map<uint64_t, bool> thinking_;
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_SINGLE_STREAM_H_
