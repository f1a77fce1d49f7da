// The plain values that cross the scheduler / executor seam: one engine
// step's plan and what the executor made of it.
#ifndef BRAID_BATCHING_STEP_PLAN_H_
#define BRAID_BATCHING_STEP_PLAN_H_

#include <cstdint>
#include <vector>

#include "batching/sampler.h"
#include "batching/work_queue.h"

namespace braid::batching {

// One request's part of a step: `tokens` are computed at context indices
// num_cached .. num_cached + tokens.size() - 1 (for a single-stream request
// the index is also the position y). A prefill chunk has many tokens, a
// decode step one; there is no separate prefill mode.
struct ScheduledSequence {
  uint64_t request_id = 0;
  QueueKind queue = QueueKind::kPrompt;  // the queue that granted the work
  int num_cached = 0;
  std::vector<int32_t> tokens;
  // Blocks covering num_cached + tokens.size() entries, in order. Blocks
  // holding entries < num_cached may be shared with other sequences.
  std::vector<int32_t> block_table;
  // True when this step computes the request's last known token, so its
  // logits give the next token.
  bool sample = false;
};

struct StepPlan {
  std::vector<ScheduledSequence> sequences;
  // Requests preempted (their blocks freed, to be recomputed) while planning.
  std::vector<uint64_t> preempted;
  int num_tokens = 0;  // sum of tokens.size()

  bool empty() const { return sequences.empty(); }
};

// The executor's answer, aligned with StepPlan::sequences: tokens[i] is the
// token sampled for sequences[i] (meaningful only where `sample` is set).
struct StepOutput {
  std::vector<SampledToken> tokens;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_STEP_PLAN_H_
