#include "batching/scheduler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "batching/scheduler_request.h"

namespace braid::batching {
namespace {

constexpr QueueKind kServiceOrder[] = {QueueKind::kIo, QueueKind::kReasoning,
                                       QueueKind::kPrompt};

}  // namespace

absl::Status SchedulerOptions::Validate() const {
  if (block_size < 1 || num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV pool needs at least one block of at least one "
                     "token (block_size ",
                     block_size, ", num_blocks ", num_blocks, ")"));
  }
  if (max_batch_tokens < 1 || max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        "max_batch_tokens and max_num_seqs must be at least 1");
  }
  if (lookahead_slots < 0) {
    return absl::InvalidArgumentError("lookahead_slots must be at least 0");
  }
  if (prefill_tokens_per_decode_token < 0) {
    return absl::InvalidArgumentError(
        "prefill_tokens_per_decode_token must be >= 0");
  }
  if (max_prefill_tokens_while_decoding < 0) {
    return absl::InvalidArgumentError(
        "max_prefill_tokens_while_decoding must be >= 0 (0 = off)");
  }
  double sum = 0;
  for (double s : queue_shares) {
    if (!(s >= 0 && s <= 1)) {
      return absl::InvalidArgumentError("queue shares must be in [0, 1]");
    }
    sum += s;
  }
  if (sum > 1 + 1e-9) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue shares sum to ", sum, "; at most 1"));
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerOptions& options, WorkQueues queues)
    : options_(options),
      queues_(std::move(queues)),
      blocks_(options.num_blocks, options.block_size) {}

Scheduler::~Scheduler() = default;

Scheduler::Request& Scheduler::Get(uint64_t id) {
  auto it = requests_.find(id);
  assert(it != requests_.end());
  return *it->second;
}

const Scheduler::Request& Scheduler::Get(uint64_t id) const {
  auto it = requests_.find(id);
  assert(it != requests_.end());
  return *it->second;
}

void Scheduler::AppendKernelKinds(Request& r, int first) {
  const int end = static_cast<int>(r.meta.size());
  r.one_token.resize(end);
  for (int a = first; a < end;) {
    int b = a + 1;
    while (b < end && r.meta[b].stream == r.meta[a].stream) ++b;
    std::fill(r.one_token.begin() + a, r.one_token.begin() + b,
              b - a == 1 ? 1 : 0);
    a = b;
  }
}

void Scheduler::AddSession(uint64_t id, std::vector<int32_t> tokens,
                           std::vector<EntryTag> meta,
                           std::vector<std::vector<int32_t>> sees, int priority,
                           std::string tenant,
                           std::vector<uint8_t> one_token_kernels) {
  auto r = std::make_unique<Request>();
  r->id = id;
  r->priority = priority;
  r->tenant = std::move(tenant);
  r->arrival = next_arrival_++;
  r->tokens = std::move(tokens);
  r->meta = std::move(meta);
  r->sees = std::move(sees);
  r->one_token = std::move(one_token_kernels);
  AppendKernelKinds(*r, static_cast<int>(r->one_token.size()));
  ExtendPrefix(*r, 0);
  r->queue = QueueKind::kPrompt;
  queues_[static_cast<int>(QueueKind::kPrompt)]->Push(r->Item());
  requests_[id] = std::move(r);
}

void Scheduler::AppendEntries(uint64_t id, absl::Span<const int32_t> tokens,
                              absl::Span<const EntryTag> meta) {
  Request& r = Get(id);
  assert(tokens.size() == meta.size());
  const int first = static_cast<int>(r.tokens.size());
  r.tokens.insert(r.tokens.end(), tokens.begin(), tokens.end());
  r.meta.insert(r.meta.end(), meta.begin(), meta.end());
  AppendKernelKinds(r, first);
  ExtendPrefix(r, first);
  MoveTo(r, PhaseQueue(r));
}

void Scheduler::ExtendPrefix(Request& r, int first) {
  if (r.num_prompt_tokens < first) return;  // an earlier entry ended it
  int& prefix = r.num_prompt_tokens;
  const int end = static_cast<int>(r.meta.size());
  while (prefix < end && r.meta[prefix].stream == 0 &&
         r.meta[prefix].y == prefix) {
    ++prefix;
  }
}

void Scheduler::AddSamplePoints(uint64_t id,
                                absl::Span<const SamplePoint> points) {
  Request& r = Get(id);
  for (const SamplePoint& p : points) {
    assert(p.index >= r.num_computed &&
           p.index < static_cast<int>(r.tokens.size()));
    r.sample_points.push_back(p);
  }
  std::stable_sort(r.sample_points.begin(), r.sample_points.end(),
                   [](const SamplePoint& a, const SamplePoint& b) {
                     return a.index < b.index;
                   });
  MoveTo(r, PhaseQueue(r));
}

void Scheduler::SetSessionThinking(uint64_t id, bool thinking) {
  Request& r = Get(id);
  r.thinking = thinking;
  MoveTo(r, PhaseQueue(r));
}

void Scheduler::SetSessionInputWhileWriting(uint64_t id, bool writing) {
  Get(id).input_while_writing = writing;
}

void Scheduler::ClearSamplePoints(uint64_t id, int32_t stream) {
  Request& r = Get(id);
  r.sample_points.erase(
      std::remove_if(
          r.sample_points.begin(), r.sample_points.end(),
          [stream](const SamplePoint& p) { return p.stream == stream; }),
      r.sample_points.end());
}

int Scheduler::num_entries(uint64_t id) const {
  return static_cast<int>(Get(id).tokens.size());
}

const std::vector<int32_t>& Scheduler::block_table(uint64_t id) const {
  return Get(id).block_table;
}

void Scheduler::Remove(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  Drop(r);
  queues_[static_cast<int>(r.queue)]->Remove(id);
  requests_.erase(it);
}

// Design note. Each step fills one budget (max_batch_tokens tokens,
// max_num_seqs sequences) from the three queues in two passes. The first
// pass gives each queue its guaranteed share (queue_shares), in the order
// I/O, reasoning, prompt, so decode tokens of visible output go first and
// no queue starves however busy the others are. The second pass hands what
// is left to the queues in the same order, so an idle queue's share is not
// wasted. Within a queue the queue's own policy orders the requests. A
// request's grant is a chunk: as many of its uncomputed tokens as the budget
// and the KV pool allow, so long prompts are split across steps and decode
// tokens ride in the same forward pass as prefill chunks (vLLM v1's
// "no separate prefill mode"). When the pool is full, work that ranks below
// the request (lower priority, then most recently first admitted) is
// preempted and will be recomputed, even if it was granted work earlier in
// this step (the grant is taken back); new requests never preempt work of
// equal priority.
StepPlan Scheduler::Schedule() {
  ++step_;
  StepPlan plan;
  Budget left{options_.max_batch_tokens, options_.max_num_seqs};
  left_ = &left;
  step_decode_tokens_ = 0;
  step_prefill_tokens_ = 0;
  admission_blocked_ = false;
  for (QueueKind kind : kServiceOrder) {
    const double share = options_.queue_shares[static_cast<int>(kind)];
    Budget quota{
        static_cast<int>(std::floor(share * options_.max_batch_tokens)),
        static_cast<int>(std::ceil(share * options_.max_num_seqs))};
    ScheduleQueue(kind, quota, &left, &plan);
  }
  for (QueueKind kind : kServiceOrder) {
    ScheduleQueue(kind, left, &left, &plan);
  }
  left_ = nullptr;
  // Drop the grants of requests preempted later in the planning.
  plan.sequences.erase(
      std::remove_if(plan.sequences.begin(), plan.sequences.end(),
                     [this](const ScheduledSequence& s) {
                       return Get(s.request_id).preempted_step == step_;
                     }),
      plan.sequences.end());
  for (ScheduledSequence& s : plan.sequences) {
    const Request& r = Get(s.request_id);
    s.num_cached = r.num_computed;
    s.tokens.assign(r.tokens.begin() + r.num_computed,
                    r.tokens.begin() + r.num_computed + r.num_planned);
    s.block_table = r.block_table;
    plan.num_tokens += r.num_planned;
    const int end = r.num_computed + r.num_planned;
    // One kind of entries a chunk (NextChunk): their kernels; any count
    // above one picks the batched ones.
    s.kernel_tokens = r.one_token[r.num_computed] ? 1 : 2;
    s.meta.assign(r.meta.begin() + r.num_computed, r.meta.begin() + end);
    s.sees = r.sees;
    for (const SamplePoint& p : r.sample_points) {
      if (p.index < r.num_computed || p.index >= end) continue;
      SamplePoint q = p;
      q.index -= r.num_computed;
      s.samples.push_back(q);
    }
  }
  return plan;
}

void Scheduler::ScheduleQueue(QueueKind kind, Budget limit, Budget* left,
                              StepPlan* plan) {
  WorkQueue& queue = *queues_[static_cast<int>(kind)];
  Budget used;
  bool admission_blocked = false;
  // Work already granted in this step goes first, so a second pass extends
  // a chunk rather than starting another request's.
  std::vector<uint64_t> order = queue.Ordered();
  std::stable_partition(order.begin(), order.end(), [this](uint64_t id) {
    return Get(id).planned_step == step_;
  });
  for (uint64_t id : order) {
    int max_tokens = std::min(limit.tokens - used.tokens, left->tokens);
    if (kind == QueueKind::kPrompt && step_decode_tokens_ > 0) {
      int cap = max_tokens + step_prefill_tokens_;
      if (options_.max_prefill_tokens_while_decoding > 0) {
        cap = std::max(
            options_.max_prefill_tokens_while_decoding,
            options_.prefill_tokens_per_decode_token * step_decode_tokens_);
      }
      if (paced_prefill_cap_ != 0) {
        cap = std::min(cap, std::max(paced_prefill_cap_, 0));
      }
      max_tokens = std::min(max_tokens, cap - step_prefill_tokens_);
    }
    if (max_tokens <= 0) break;
    Request& r = Get(id);
    if (r.preempted_step == step_) continue;
    const bool new_seq = r.planned_step != step_;
    if (new_seq && (used.seqs >= limit.seqs || left->seqs <= 0)) {
      // The step's own sequence budget (not a queue's share, which the
      // second pass tops up).
      if (r.admit == 0 && left->seqs <= 0) admission_blocked_ = true;
      break;
    }
    // Once a new request could not be admitted, later new requests wait too
    // (first come, first served), while those already holding blocks go on.
    if (r.admit == 0 && admission_blocked) continue;
    const int n = Grant(r, max_tokens, plan);
    if (n == 0) {
      if (r.admit == 0) admission_blocked = admission_blocked_ = true;
      continue;
    }
    used.tokens += n;
    left->tokens -= n;
    (kind == QueueKind::kPrompt ? step_prefill_tokens_ : step_decode_tokens_) +=
        n;
    if (new_seq) {
      ++used.seqs;
      --left->seqs;
    }
    queue.Charge(id, n);
  }
}

// The next chunk of `r`: as many of its uncomputed entries as `max_tokens`
// allows, of one kind of kernels (Request::one_token): not extended past
// them, nor appended to a chunk of the other kind. Sessions advance in
// lockstep: a chunk either stops before the first pending sample point or
// covers all of them, so every active output stream gets its next token in
// the same step.
int Scheduler::NextChunk(const Request& r, int max_tokens) const {
  const int done = r.num_computed + r.num_planned;
  int n = std::min(max_tokens, r.remaining());
  if (n <= 0) return 0;
  if (r.num_planned > 0 && r.one_token[done] != r.one_token[r.num_computed]) {
    return 0;
  }
  const int want = n;
  int same = 1;
  while (same < n && r.one_token[done + same] == r.one_token[done]) ++same;
  n = same;
  int first = -1, last = -1;
  for (const SamplePoint& p : r.sample_points) {
    if (p.index < done) continue;
    if (first < 0) first = p.index;
    last = p.index;
  }
  if (first >= 0 && done + n > first && done + n <= last) n = first - done;
  if (n == 0 && done == first && done + want > last) {
    // Pending samples over entries of both kinds (no layout appends them
    // so): lockstep comes first.
    n = want;
  }
  return std::max(n, 0);
}

int Scheduler::Grant(Request& r, int max_tokens, StepPlan* plan) {
  const bool planned = r.planned_step == step_;
  if (!planned) r.num_planned = 0;
  // At most max_num_seqs requests hold blocks, so every one of them can be
  // scheduled in each step.
  if (r.admit == 0 && num_running_ >= options_.max_num_seqs) return 0;
  const bool attached = !planned && r.admit == 0 && AttachCachedPrefix(r);
  const int bs = options_.block_size;
  const int done = r.num_computed + r.num_planned;
  auto blocks_for = [&](int entries) {
    return (entries + bs - 1) / bs - static_cast<int>(r.block_table.size());
  };
  // The next chunk that fits in `free` more blocks.
  auto chunk_within = [&](int free) {
    const int fit = (static_cast<int>(r.block_table.size()) + free) * bs - done;
    return fit > 0 ? NextChunk(r, std::min(max_tokens, fit)) : 0;
  };
  int n = NextChunk(r, max_tokens);
  if (r.admit == 0 && n > 0 && !OutranksRunning(r)) {
    // Admission leaves a block free for each running request (the next
    // block its decoding will need): a request admitted into the last
    // blocks would only be preempted again a few steps later, each time
    // stalling a stream that had started.
    const int room = blocks_.num_free_blocks() - num_running_;
    if (blocks_for(done + n) > room) n = chunk_within(room);
  }
  bool out_of_blocks = false;
  if (n > 0 && blocks_for(done + n) > 0 &&
      !MakeRoom(r, blocks_for(done + n), plan)) {
    out_of_blocks = true;
    n = chunk_within(blocks_.num_free_blocks());  // what still fits, if any
  }
  if (n <= 0) {
    if (attached) {
      Drop(r);  // give the cached prefix back; it was never used
    } else if (out_of_blocks && !planned && r.admit != 0) {
      Preempt(r, plan);  // it ranks lowest: make room for the others
    }
    return 0;
  }
  if (blocks_for(done + n) > 0) {
    const bool ok = blocks_.Allocate(blocks_for(done + n), &r.block_table);
    assert(ok);
    (void)ok;
  }
  const int ahead = done + n + options_.lookahead_slots;
  if (options_.lookahead_slots > 0 && r.queue != QueueKind::kPrompt &&
      blocks_for(ahead) > 0 &&
      blocks_.num_free_blocks() - blocks_for(ahead) >= num_running_) {
    blocks_.Allocate(blocks_for(ahead), &r.block_table);
  }
  if (r.admit == 0) {
    r.admit = next_admit_++;
    if (r.rank == 0) r.rank = r.admit;
    ++num_running_;
  }
  if (attached) num_prefix_hit_tokens_ += r.num_computed;
  if (!planned) {
    r.planned_step = step_;
    ScheduledSequence s;
    s.request_id = r.id;
    s.queue = r.queue;
    plan->sequences.push_back(std::move(s));
  }
  r.num_planned += n;
  return n;
}

bool Scheduler::OutranksRunning(const Request& r) const {
  for (const auto& [id, q] : requests_) {
    if (q->admit != 0 && q->priority < r.priority) return true;
  }
  return false;
}

bool Scheduler::MakeRoom(const Request& r, int n, StepPlan* plan) {
  while (blocks_.num_free_blocks() < n) {
    Request* victim = nullptr;
    for (auto& [id, q] : requests_) {
      if (q.get() == &r || q->admit == 0) continue;
      if (victim == nullptr || q->RanksBelow(*victim)) victim = q.get();
    }
    if (victim == nullptr || !victim->RanksBelow(r)) return false;
    if (victim->planned_step == step_) {
      // Already granted work in this step: take the grant back.
      left_->tokens += victim->num_planned;
      left_->seqs += 1;
    }
    Preempt(*victim, plan);
  }
  return true;
}

void Scheduler::Drop(Request& r) {
  if (r.admit != 0) --num_running_;
  blocks_.Release(r.block_table);
  r.block_table.clear();
  r.block_hashes.clear();
  r.num_computed = 0;
  r.num_planned = 0;
  r.admit = 0;
}

void Scheduler::Preempt(Request& r, StepPlan* plan) {
  Drop(r);
  ++r.num_preemptions;
  ++num_preemptions_;
  r.preempted_step = step_;
  MoveTo(r, QueueKind::kPrompt);
  plan->preempted.push_back(r.id);
}

void Scheduler::Update(const StepPlan& plan) {
  for (const ScheduledSequence& s : plan.sequences) {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;
    Request& r = *it->second;
    r.num_computed += static_cast<int>(s.tokens.size());
    r.num_planned = 0;
    num_computed_tokens_ += static_cast<int64_t>(s.tokens.size());
    CommitFullBlocks(r);
    r.sample_points.erase(
        std::remove_if(
            r.sample_points.begin(), r.sample_points.end(),
            [&r](const SamplePoint& p) { return p.index < r.num_computed; }),
        r.sample_points.end());
    MoveTo(r, PhaseQueue(r));
  }
}

QueueKind Scheduler::PhaseQueue(const Request& r) const {
  const int remaining = static_cast<int>(r.tokens.size()) - r.num_computed;
  // A context none of which is computed yet is prompt work, and so is bulk
  // input (a turn's input too); decode steps (a few entries per stream),
  // small input that arrives while the streams write (their next samples
  // wait for it) and an idle session sit in the I/O queue, or in the
  // reasoning queue while the session thinks.
  if (r.num_computed == 0 && remaining > 0) return QueueKind::kPrompt;
  const int decode = std::max<int>(1, r.sees.size());
  const int small =
      r.input_while_writing ? options_.session_small_input_tokens : 0;
  if (remaining > decode + small) return QueueKind::kPrompt;
  return r.thinking ? QueueKind::kReasoning : QueueKind::kIo;
}

void Scheduler::MoveTo(Request& r, QueueKind kind) {
  if (r.queue == kind) return;
  queues_[static_cast<int>(r.queue)]->Remove(r.id);
  queues_[static_cast<int>(kind)]->Push(r.Item());
  r.queue = kind;
}

const std::vector<int32_t>& Scheduler::tokens(uint64_t id) const {
  return Get(id).tokens;
}
int Scheduler::num_computed_tokens(uint64_t id) const {
  return Get(id).num_computed;
}
int Scheduler::num_preemptions(uint64_t id) const {
  return Get(id).num_preemptions;
}
QueueKind Scheduler::queue(uint64_t id) const { return Get(id).queue; }

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_requests = static_cast<int>(requests_.size());
  for (const auto& [id, r] : requests_) {
    ++(r->admit == 0 ? s.num_waiting : s.num_running);
    if (r->admit != 0) ++s.queue_running[static_cast<int>(r->queue)];
  }
  for (int q = 0; q < kNumQueues; ++q) s.queue_sizes[q] = queues_[q]->size();
  s.num_steps = step_;
  s.num_preemptions = num_preemptions_;
  s.num_computed_tokens = num_computed_tokens_;
  s.num_prefix_hit_tokens = num_prefix_hit_tokens_;
  s.blocks = blocks_.stats();
  return s;
}

}  // namespace braid::batching
