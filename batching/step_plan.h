// The plain values that cross the scheduler / executor seam: one engine
// step's plan and what the executor made of it.
#ifndef BRAID_BATCHING_STEP_PLAN_H_
#define BRAID_BATCHING_STEP_PLAN_H_

#include <cstdint>
#include <vector>

#include "batching/sampler.h"
#include "batching/work_queue.h"

namespace braid::batching {

class Sampler;

// Where an entry sits in a session's layout (docs/MULTISTREAM.md): its
// stream and position y. Mirrors model::EntryMeta; kept here so the plan
// stays a plain value without a model dependency.
struct EntryTag {
  int32_t stream = 0;
  int32_t y = 0;
};

// A sample: the logits of tokens[index] (an index into the step's tokens)
// give the next token of output stream `stream` (the session's stream
// index; a Generate request's one output stream is 1). Several may read the
// same row (a session's branches sampling their first token from the shared
// prefix). `sampler` is filled by the engine before Execute (the scheduler
// leaves it null).
struct SamplePoint {
  int index = 0;
  int32_t stream = 0;
  Sampler* sampler = nullptr;
};

// One request's part of a step: `tokens` are its entries at context
// indices num_cached .. num_cached + tokens.size() - 1. A prefill chunk has
// many, a decode step one per output stream; there is no separate prefill
// mode.
struct ScheduledSequence {
  uint64_t request_id = 0;
  QueueKind queue = QueueKind::kPrompt;  // the queue that granted the work
  int num_cached = 0;
  std::vector<int32_t> tokens;
  // Blocks covering num_cached + tokens.size() entries, in order. Blocks
  // holding entries < num_cached may be shared with other sequences.
  std::vector<int32_t> block_table;
  // Which attention kernels the entries take (model::BatchSequence::
  // kernel_tokens): 1 for entries appended alone in their stream's run (a
  // sampled token), 2 for entries appended in a longer run (a prompt, an
  // input chunk), whatever the chunk's size, so chunking and recomputation
  // never change their bits. A chunk holds one kind (Scheduler::NextChunk).
  int kernel_tokens = 0;

  // The rows to sample, in lockstep for every active output stream.
  std::vector<SamplePoint> samples;

  // `meta[i]` tags tokens[i] (a Generate request's entries are all stream 0
  // at y = context index); `sees[s]` is sees(s) of stream s besides itself.
  // The executor computes each run of consecutive entries of one stream as
  // its own model::BatchSequence over the shared block table, so a decode
  // step of K streams is K one-token sequences (the same attention kernel
  // as a single-stream decode step).
  std::vector<EntryTag> meta;
  std::vector<std::vector<int32_t>> sees;
};

struct StepPlan {
  std::vector<ScheduledSequence> sequences;
  // Requests preempted (their blocks freed, to be recomputed) while planning.
  std::vector<uint64_t> preempted;
  int num_tokens = 0;  // sum of tokens.size()
  // Set by the engine when no request waits to join: the next step will
  // likely be this one's sequences, a token further (the executor may have
  // the model start it early: model::Model::SetLookahead).
  bool lookahead = false;

  bool empty() const { return sequences.empty(); }
};

// The executor's answer, aligned with StepPlan::sequences: tokens[i][j] was
// sampled for sequences[i].samples[j].
struct StepOutput {
  std::vector<std::vector<SampledToken>> tokens;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_STEP_PLAN_H_
