// The continuous-batching planner: which requests compute which tokens in the
// next engine step, under a token and sequence budget and the KV pool.
//
// Pure: no threads, no clock, no model. The engine calls Schedule() for a
// StepPlan, runs it, and calls Update() after it ran; requests are added and
// removed between steps. Tests drive it step by step against tables of
// expected plans (scheduler_test.cc, queues/fairness_test.cc).
//
// One kind of request: a session's KV context (a Generate request is a
// session of one output stream whose entries are stream 0 at y = index,
// batching/session.h). It is a list of entries (tokens with their (stream, y)
// tags), a count of those already in the KV cache (num_computed_tokens) and
// the sample points its owner asks for. Each step computes some of the rest:
// many at once while prefilling (in chunks), one per output stream while
// decoding; the owner appends each sampled token as a new entry. Preemption
// drops the KV blocks and resets the count, so the request recomputes its
// entries later (the prefix cache often gives most of them back).
//
// Owned by the engine; engine thread only; not thread-safe.
#ifndef BRAID_BATCHING_SCHEDULER_H_
#define BRAID_BATCHING_SCHEDULER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "batching/block_manager.h"
#include "batching/step_plan.h"
#include "batching/work_queue.h"

namespace braid::batching {

struct SchedulerOptions {
  int num_blocks = 1024;
  int block_size = 16;
  int max_batch_tokens = 512;  // tokens per step, all sequences together
  // Sequences per step, and requests holding KV blocks at once (so every
  // admitted request can be scheduled in every step).
  int max_num_seqs = 64;
  // Entries past a decoding request's step its blocks cover when a block is
  // free without preempting or admission's reserve: room for a lookahead
  // step (model::Model::SetLookahead) at a block boundary. 0: none.
  int lookahead_slots = 0;
  // Guaranteed share of each budget per queue, indexed by QueueKind; must
  // sum to at most 1. What a queue leaves unused goes to the others, I/O
  // first, then reasoning, then prompt.
  std::array<double, kNumQueues> queue_shares = {0.5, 0.25, 0.25};
  // Stream isolation: while requests decode, a step's prefill tokens are
  // limited to max(max_prefill_tokens_while_decoding,
  // prefill_tokens_per_decode_token x the step's decode tokens), so a long
  // prompt arriving slows each decode step by a bounded factor instead of
  // stalling it for a whole chunk; prompts admitted while nothing decodes
  // still get the full budget. 0 turns the limit off.
  int max_prefill_tokens_while_decoding = 0;
  int prefill_tokens_per_decode_token = 2;
  // A session's input of up to this many entries, appended while its
  // streams write, is I/O work (or reasoning, while it thinks) like the
  // decode steps it holds up, not bulk prefill for the prompt queue
  // (docs/MULTISTREAM.md's queues).
  int session_small_input_tokens = 32;
  absl::Status Validate() const;
};

struct SchedulerStats {
  int num_requests = 0;
  int num_waiting = 0;  // holding no KV blocks
  int num_running = 0;  // holding KV blocks
  std::array<int, kNumQueues> queue_sizes = {};
  // Per queue: the requests in it that hold KV blocks.
  std::array<int, kNumQueues> queue_running = {};
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_computed_tokens = 0;    // tokens run through the model
  int64_t num_prefix_hit_tokens = 0;  // tokens taken from the prefix cache
  BlockManagerStats blocks;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, WorkQueues queues);
  ~Scheduler();

  // A session (docs/MULTISTREAM.md): one KV context whose entries carry
  // their (stream, y) tags. `tokens`/`meta` are its first entries (the
  // shared prefix, stream 0 at y = 0..; non-empty); `sees[s]` is sees(s)
  // besides s. Entries are computed in the order they are appended, which
  // the caller keeps non-decreasing in y so that every entry an entry sees
  // comes before it. Only the leading entries of stream 0 at y = index
  // (the prefix, and entries appended after it as long as they continue it:
  // a Generate request's output) take part in the prefix cache.
  // `one_token_kernels` (from Keep): which of the first entries take the
  // one-token attention kernels (the rest is derived from the entries: an
  // entry alone in its stream's run does), so a resumed session's entries,
  // recomputed where the cache lost them, hold the bits a session never
  // closed holds.
  void AddSession(uint64_t id, std::vector<int32_t> tokens,
                  std::vector<EntryTag> meta,
                  std::vector<std::vector<int32_t>> sees, int priority,
                  std::string tenant,
                  std::vector<uint8_t> one_token_kernels = {});
  // Appends entries to a session's context, to be computed in later steps.
  void AppendEntries(uint64_t id, absl::Span<const int32_t> tokens,
                     absl::Span<const EntryTag> meta);
  // Asks for samples: the logits of entry `index` (context index, not yet
  // computed) give the next token of output stream `stream`. All pending
  // points of a session are computed in one step (lockstep); a point is
  // consumed by the step that computes its entry.
  void AddSamplePoints(uint64_t id, absl::Span<const SamplePoint> points);
  // Drops a stream's pending sample points (its turn ended).
  void ClearSamplePoints(uint64_t id, int32_t stream);
  // Whether a session's decode steps are thinking (every stream that writes
  // is between the thinking markers): they go to the reasoning queue, not
  // the I/O queue. A session says so itself (its streams' markers).
  void SetSessionThinking(uint64_t id, bool thinking);
  // Whether the input a session appends next arrives while its streams
  // write (see session_small_input_tokens); before the AppendEntries.
  void SetSessionInputWhileWriting(uint64_t id, bool writing);
  // Context entries of a request (computed or not) and its block table.
  int num_entries(uint64_t id) const;
  const std::vector<int32_t>& block_table(uint64_t id) const;

  // Forgets a request in any phase and frees its blocks.
  void Remove(uint64_t id);

  // A session's entries as Keep hands them back, for AddSession on resume.
  struct SessionEntries {
    std::vector<int32_t> tokens;
    std::vector<EntryTag> meta;
    std::vector<uint8_t> one_token_kernels;  // per entry
  };
  // Removes a session like Remove, but first leaves its computed entries in
  // the prefix cache, free and evictable like any cached block: the full
  // prefix blocks by their tokens, every later block (the partial last one
  // too) under a key of its tokens, (stream, y) tags and its streams'
  // sees(s), chained to the blocks before it. AddSession with the returned
  // entries and the same sees takes back what is still cached when it is
  // first scheduled, and computes the rest.
  SessionEntries Keep(uint64_t id);
  bool Contains(uint64_t id) const { return requests_.contains(id); }

  // Plans the next step. Every request in the plan is scheduled once; the
  // plan may preempt requests (listed in StepPlan::preempted).
  StepPlan Schedule();

  // A further limit on a step's prefill tokens while requests decode, from
  // measured step times (PrefillPacer); 0 = none, < 0 = no prefill at all
  // while requests decode. Applies from the next Schedule() on, under the
  // static limit of SchedulerOptions.
  void SetPacedPrefillCap(int cap) { paced_prefill_cap_ = cap; }
  // Whether the last Schedule() left a new request out for want of KV
  // blocks or a sequence slot (not for want of prefill budget).
  bool admission_blocked() const { return admission_blocked_; }

  // Applies a step that ran: counts the computed entries, caches full
  // blocks, consumes the sample points computed and moves requests between
  // queues by phase. The owner then appends the sampled tokens
  // (AppendEntries, AddSamplePoints).
  void Update(const StepPlan& plan);

  // A request's entries' tokens and progress; for tests.
  const std::vector<int32_t>& tokens(uint64_t id) const;
  int num_computed_tokens(uint64_t id) const;
  int num_preemptions(uint64_t id) const;
  QueueKind queue(uint64_t id) const;

  SchedulerStats stats() const;
  int num_running() const { return num_running_; }  // holding KV blocks
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Request;
  struct Budget {
    int tokens = 0;
    int seqs = 0;
  };

  void ScheduleQueue(QueueKind kind, Budget limit, Budget* left,
                     StepPlan* plan);
  // How many more tokens `r` may compute in this step given `max_tokens`
  // (one kind of kernels a chunk, lockstep sample points).
  int NextChunk(const Request& r, int max_tokens) const;
  // Request::one_token of the entries from index `first` on.
  static void AppendKernelKinds(Request& r, int first);
  // A session's cacheable prefix (Request::num_prompt_tokens): its leading
  // entries of stream 0 at y = context index, which hold what an ordinary
  // request's tokens would; grown over entries appended from `first` on.
  static void ExtendPrefix(Request& r, int first);
  // Grants up to `max_tokens` more tokens of `r` in this step; returns how
  // many (0 when the KV pool cannot hold them even after preemption).
  int Grant(Request& r, int max_tokens, StepPlan* plan);
  // Whether some request holding blocks has a lower priority than `r`
  // (which may then preempt it to be admitted).
  bool OutranksRunning(const Request& r) const;
  // Makes `n` blocks free by preempting work that ranks below `r`; false
  // when `r` itself ranks lowest.
  bool MakeRoom(const Request& r, int n, StepPlan* plan);
  void Preempt(Request& r, StepPlan* plan);
  // Releases every block and forgets the computed entries.
  void Drop(Request& r);
  // Takes the cached blocks of the request's prefix; true when any.
  bool AttachCachedPrefix(Request& r);
  // A kept session's blocks (Keep): its prefix blocks, then the keyed
  // blocks after them, up to its first sample point. True when any keyed
  // block came back; otherwise it takes nothing.
  bool AttachKeptSession(Request& r);
  // Keep's key of the session block holding entries [first, first + n).
  std::vector<int32_t> SessionBlockKey(const Request& r, int first,
                                       int n) const;
  void CommitFullBlocks(Request& r);
  void MoveTo(Request& r, QueueKind kind);
  QueueKind PhaseQueue(const Request& r) const;
  Request& Get(uint64_t id);
  const Request& Get(uint64_t id) const;

  const SchedulerOptions options_;
  WorkQueues queues_;
  BlockManager blocks_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Request>> requests_;
  uint64_t next_arrival_ = 1;
  uint64_t next_admit_ = 1;
  int num_running_ = 0;     // requests holding blocks
  Budget* left_ = nullptr;  // the step budget while Schedule() runs
  int64_t step_ = 0;
  // Within Schedule(): decode tokens and prefill tokens granted so far.
  int step_decode_tokens_ = 0;
  int step_prefill_tokens_ = 0;
  int paced_prefill_cap_ = 0;
  bool admission_blocked_ = false;  // admission_blocked()
  int64_t num_preemptions_ = 0;
  int64_t num_computed_tokens_ = 0;
  int64_t num_prefix_hit_tokens_ = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_SCHEDULER_H_
