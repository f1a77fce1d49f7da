// Scheduler::Request, the scheduler's state of one request: private to the
// scheduler's sources (scheduler.cc, scheduler_cache.cc).
#ifndef BRAID_BATCHING_SCHEDULER_REQUEST_H_
#define BRAID_BATCHING_SCHEDULER_REQUEST_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "batching/scheduler.h"

namespace braid::batching {

// The scheduler's state of one request: a session's KV context (a Generate
// request's is a session of one output stream, batching/session.h).
struct Scheduler::Request {
  uint64_t id = 0;
  int priority = 0;
  std::string tenant;
  uint64_t arrival = 0;
  std::vector<int32_t> tokens;  // the entries' tokens, in context order
  // The leading entries of stream 0 at y = index (ExtendPrefix): a prompt
  // and, while they continue it, its output; the part the prefix cache
  // holds by tokens.
  int num_prompt_tokens = 0;
  int num_computed = 0;  // entries in the KV cache
  std::vector<int32_t> block_table;
  std::vector<uint64_t> block_hashes;  // of the committed (full) blocks
  QueueKind queue = QueueKind::kPrompt;
  bool thinking = false;  // SetSessionThinking
  // Its last input arrived while its streams wrote (SetSessionInput-
  // WhileWriting): up to session_small_input_tokens of it is I/O work.
  bool input_while_writing = false;
  // Entry tags, sees(s) per stream, pending samples (absolute entry
  // indices, ascending).
  std::vector<EntryTag> meta;
  std::vector<std::vector<int32_t>> sees;
  std::vector<SamplePoint> sample_points;
  // Per entry, 1 if it takes the one-token attention kernels: it
  // came alone in its stream's run of an append (a sampled token; input fed
  // a position a step), 0 if in a run of more (a prefix, an input chunk).
  // Fixed when appended, so a session's bits do not depend on how its
  // entries are chunked into steps (pacing, batching) nor on a recompute
  // after eviction (Keep hands them back). NextChunk keeps a step's
  // chunk to one kind.
  std::vector<uint8_t> one_token;
  uint64_t admit = 0;  // admission order while holding blocks; 0 = none
  // The order of the first admission, kept when preempted: a recomputed
  // request ranks by when it first ran, not as the newest.
  uint64_t rank = 0;
  int num_preemptions = 0;
  // Planning state of the current step.
  int64_t planned_step = -1;
  int num_planned = 0;
  int64_t preempted_step = -1;

  WorkItem Item() const { return {id, priority, tenant, arrival}; }
  int remaining() const {
    return static_cast<int>(tokens.size()) - num_computed - num_planned;
  }
  // Rank for preemption: lower priority first, then the most recently
  // first admitted (a request holding nothing counts as the most recent of
  // all). A preempted request keeps its first admission, so once it runs
  // again the requests admitted after it go before it: preemption falls on
  // the newest work, which has streamed the least, not again and again on
  // the same request.
  bool RanksBelow(const Request& other) const {
    if (priority != other.priority) return priority < other.priority;
    const uint64_t a = admit == 0 ? std::numeric_limits<uint64_t>::max() : rank;
    const uint64_t b =
        other.admit == 0 ? std::numeric_limits<uint64_t>::max() : other.rank;
    return a > b;
  }
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_SCHEDULER_REQUEST_H_
