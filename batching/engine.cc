#include "batching/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace braid::batching {
namespace {

double Seconds(absl::Time from, absl::Time to) {
  return absl::ToDoubleSeconds(to - from);
}

static_assert(static_cast<int>(QueueKind::kIo) ==
                      static_cast<int>(metrics::Queue::kIo) &&
                  static_cast<int>(QueueKind::kReasoning) ==
                      static_cast<int>(metrics::Queue::kReasoning) &&
                  static_cast<int>(QueueKind::kPrompt) ==
                      static_cast<int>(metrics::Queue::kPrompt),
              "metrics::Queue mirrors batching::QueueKind");

metrics::FinishReason MetricsReason(FinishReason reason, bool error) {
  if (error) return metrics::FinishReason::kError;
  switch (reason) {
    case FinishReason::kEos:
      return metrics::FinishReason::kEos;
    case FinishReason::kLength:
      return metrics::FinishReason::kLength;
    case FinishReason::kStop:
      return metrics::FinishReason::kStop;
    case FinishReason::kContextFull:
      return metrics::FinishReason::kContextFull;
    case FinishReason::kCancelled:
      return metrics::FinishReason::kCancelled;
    case FinishReason::kNone:
      break;
  }
  return metrics::FinishReason::kError;
}

SessionOptions RequestSession(GenerationRequest& r) {
  SessionStreamOptions out;
  out.name = "output";
  out.output = true;
  TakeSampling(r, out);
  SessionOptions o;
  o.session_id = std::move(r.request_id);
  o.prefix = std::move(r.prompt);
  o.streams.push_back(std::move(out));
  o.priority = r.priority;
  o.tenant = std::move(r.tenant);
  o.tpot_objective = r.tpot_objective;
  o.ttft_objective = r.ttft_objective;
  o.request = true;
  return o;
}

}  // namespace

// A Generate request's session sink: its tokens become the request's
// chunks as they come; the turn's end is kept for the final chunk, which
// the engine sends (Engine::Finish).
class Engine::RequestSink : public SessionSink {
 public:
  RequestSink(std::shared_ptr<OutputSink> out, bool logprobs)
      : out_(std::move(out)), logprobs_(logprobs) {}

  void Push(SessionEvent e) override {
    if (e.kind == SessionEvent::Kind::kTurnEnd) {
      turn_end_ = std::move(e);
      return;
    }
    if (e.kind != SessionEvent::Kind::kTokens) return;
    OutputChunk chunk;
    for (SampledToken& t : e.tokens) {
      chunk.token_ids.push_back(t.token_id);
      if (logprobs_) chunk.logprobs.push_back(std::move(t));
    }
    chunk.reasoning = e.reasoning;
    chunk.text = std::move(e.text);
    out_->Push(std::move(chunk));
  }

  OutputSink& out() { return *out_; }
  const SessionEvent& turn_end() const { return turn_end_; }

 private:
  const std::shared_ptr<OutputSink> out_;
  const bool logprobs_;
  SessionEvent turn_end_;
};

Engine::Engine(Executor* executor, const model::Tokenizer* tokenizer,
               const EngineOptions& options, WorkQueues queues,
               metrics::EngineMetrics* metrics)
    : executor_(executor),
      tokenizer_(tokenizer),
      options_(options),
      metrics_(metrics),
      scheduler_(options.scheduler, std::move(queues)),
      pacer_(options.max_decode_slowdown, 1,
             absl::ToDoubleSeconds(options.tpot_objective)) {
  pacer_.UseDeadlines(options.ttft_objective > absl::ZeroDuration());
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<uint64_t> Engine::Submit(GenerationRequest request,
                                        std::shared_ptr<OutputSink> sink) {
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const int64_t pool_tokens =
      int64_t{options_.scheduler.num_blocks} * options_.scheduler.block_size;
  if (request.deadline <= absl::Now()) {
    return absl::DeadlineExceededError(
        "the request's deadline passed before it was queued");
  }
  auto reject = [this](metrics::Rejection bound) {
    if (metrics_ != nullptr) metrics_->RecordRejection(bound);
  };
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the engine is shutting down");
  if (prompt_tokens + request.max_tokens > pool_tokens) {
    reject(metrics::Rejection::kKvCapacity);
    return absl::ResourceExhaustedError(
        absl::StrCat("the request needs ", prompt_tokens + request.max_tokens,
                     " tokens of KV cache but the whole pool holds ",
                     pool_tokens, " (--kv_budget_mb / --kv_budget_tokens)"));
  }
  // A request that a free batch slot starts at the next step does not
  // wait: the bound counts the requests beyond the free slots (a burst at
  // an idle engine is not refused while slots are free).
  const int waiting =
      stats_.waiting -
      std::max(0, options_.scheduler.max_num_seqs - stats_.running);
  if (waiting >= options_.max_waiting_requests) {
    reject(metrics::Rejection::kWaitingRequests);
    return absl::ResourceExhaustedError(absl::StrCat(
        "waiting queue is full: ", waiting,
        " requests are waiting for a batch slot (--max_waiting_requests=",
        options_.max_waiting_requests, "); retry later"));
  }
  if (stats_.waiting_tokens + prompt_tokens > options_.max_waiting_tokens) {
    reject(metrics::Rejection::kWaitingTokens);
    return absl::ResourceExhaustedError(absl::StrCat(
        "waiting queue is full: ", stats_.waiting_tokens,
        " prompt tokens are waiting and this request adds ", prompt_tokens,
        " (--max_waiting_tokens=", options_.max_waiting_tokens,
        "); retry later"));
  }
  const uint64_t handle = next_handle_++;
  ++stats_.requests;
  ++stats_.waiting;
  stats_.waiting_tokens += prompt_tokens;
  Work w;
  w.request = std::make_unique<Request>();
  Request& r = *w.request;
  r.sink =
      std::make_shared<RequestSink>(std::move(sink), request.sampling.logprobs);
  r.arrival = request.arrival;
  r.deadline = request.deadline;
  w.session = std::make_unique<Session>(RequestSession(request), r.sink, handle,
                                        tokenizer_, options_.reasoning,
                                        options_.max_context_tokens);
  inbox_.push_back(std::move(w));
  return handle;
}

void Engine::Cancel(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  cancels_.push_back(handle);
}

EngineStats Engine::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Engine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Engine::Loop() {
  while (DrainInbox()) {
    if (!work_.empty()) RunStep();
    PublishStats();
  }
  PublishStats();
}

bool Engine::DrainInbox() {
  std::vector<Work> incoming;
  std::vector<uint64_t> cancels;
  std::vector<SessionCommand> commands;
  bool shutdown;
  {
    absl::MutexLock lock(&mu_);
    auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || busy_ || !inbox_.empty() || !cancels_.empty() ||
             !session_commands_.empty();
    };
    mu_.Await(absl::Condition(&has_work));
    incoming.swap(inbox_);
    cancels.swap(cancels_);
    commands.swap(session_commands_);
    shutdown = shutdown_;
  }
  for (SessionCommand& c : commands) ApplySessionCommand(c);
  for (Work& w : incoming) {
    Session& s = *w.session;
    work_[s.handle()] = std::move(w);
    s.Open(scheduler_);
  }
  for (uint64_t id : cancels) {
    auto it = work_.find(id);
    if (it == work_.end()) continue;
    if (it->second.request != nullptr) {
      Finish(it->second, FinishReason::kCancelled, absl::OkStatus());
    } else {
      FinishSession(*it->second.session,
                    absl::CancelledError("the session was cancelled"));
    }
  }
  ExpireDeadlines();
  ExpireIdleSessions(absl::Now());
  while (shutdown && !work_.empty()) {
    Work& w = work_.begin()->second;
    if (w.request != nullptr) {
      Finish(w, FinishReason::kCancelled, absl::OkStatus());
    } else {
      FinishSession(*w.session,
                    absl::UnavailableError("the engine is shutting down"));
    }
  }
  return !shutdown;
}

void Engine::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  std::vector<Work*> expired;
  for (auto& [id, w] : work_) {
    if (w.request != nullptr && w.request->deadline <= now) {
      expired.push_back(&w);
    }
  }
  for (Work* w : expired) {
    const int n = w->request->num_output;
    Finish(*w, FinishReason::kNone,
           absl::DeadlineExceededError(absl::StrCat(
               "deadline exceeded after ", n,
               " output tokens (the client's deadline or the server's "
               "--max_request_seconds)")));
  }
}

absl::Duration Engine::StepObjective() const {
  absl::Duration objective = absl::InfiniteDuration();
  for (const auto& [handle, w] : work_) {
    if (!scheduler_.Contains(handle) ||
        scheduler_.queue(handle) == QueueKind::kPrompt) {
      continue;  // not decoding
    }
    const absl::Duration own = w.session->options().tpot_objective;
    objective = std::min(
        objective, own > absl::ZeroDuration() ? own : options_.tpot_objective);
  }
  return objective == absl::InfiniteDuration() ? options_.tpot_objective
                                               : objective;
}

absl::Span<const PrefillPacer::DuePrompt> Engine::PromptsDue(absl::Time now) {
  due_.clear();
  if (options_.ttft_objective <= absl::ZeroDuration()) return due_;
  // Requests not admitted yet count while admission is held up only by
  // prompt budget (which the pacer gives); while they wait for KV blocks or
  // a batch slot, prompt tokens cannot help them, and their clock starts
  // once they could be admitted.
  const bool admitting =
      !scheduler_.admission_blocked() &&
      scheduler_.num_running() < options_.scheduler.max_num_seqs;
  for (auto& [handle, w] : work_) {
    if (!scheduler_.Contains(handle) ||
        scheduler_.queue(handle) != QueueKind::kPrompt) {
      w.ForgetPrompt();
      continue;
    }
    const int left =
        scheduler_.num_entries(handle) - scheduler_.num_computed_tokens(handle);
    if (left <= 0) continue;
    if (w.request != nullptr && w.request->waiting && !admitting) {
      w.ForgetPrompt();
      continue;
    }
    if (w.prompt_since == absl::InfinitePast()) w.prompt_since = now;
    const double rest =
        pacer_.RestOfPrompt(w.prompt_done, w.prompt_work_s, left);
    if (rest <= 0) continue;  // nothing measured: steps are not paced
    const absl::Duration own = w.session->options().ttft_objective;
    const absl::Time due =
        w.prompt_since +
        (own > absl::ZeroDuration() ? own : options_.ttft_objective) +
        absl::Seconds(options_.prompt_slowdown * (w.prompt_work_s + rest));
    due_.push_back({absl::ToDoubleSeconds(due - now), rest});
  }
  return due_;
}

void Engine::RunStep() {
  step_objective_ = StepObjective();
  pacer_.SetStepObjective(absl::ToDoubleSeconds(step_objective_));
  scheduler_.SetPacedPrefillCap(pacer_.Cap(PromptsDue(absl::Now())));
  StepPlan plan = scheduler_.Schedule();
  if (plan.empty()) {
    pacer_.Reset();
    // Nothing fits now (Submit keeps out requests that never fit); wait for
    // the inbox instead of spinning.
    absl::MutexLock lock(&mu_);
    auto inbox = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || !inbox_.empty() || !cancels_.empty() ||
             !session_commands_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&inbox), absl::Milliseconds(50));
    return;
  }
  plan.lookahead = ExpectsSameWork(plan);
  const absl::Time now = absl::Now();
  StartStep(plan, now);
  absl::StatusOr<StepOutput> output = executor_->Execute(plan);
  EndStep(plan, now);
  if (!output.ok()) {
    FailStep(plan, output.status());
    return;
  }
  ApplyStep(plan, *output, now);
}

// Nothing waits to join (no queued request, nothing in the inbox) and the
// plan is all decoding: the next step is likely the same sequences a token
// further.
bool Engine::ExpectsSameWork(const StepPlan& plan) {
  if (scheduler_.num_running() != scheduler_.stats().num_requests) {
    return false;
  }
  for (const ScheduledSequence& s : plan.sequences) {
    if (s.queue == QueueKind::kPrompt) return false;
  }
  absl::MutexLock lock(&mu_);
  return inbox_.empty() && cancels_.empty() && session_commands_.empty();
}

void Engine::StartStep(StepPlan& plan, absl::Time now) {
  int64_t started = 0, started_tokens = 0;
  for (ScheduledSequence& s : plan.sequences) {
    Work& w = work_.at(s.request_id);
    for (SamplePoint& p : s.samples) p.sampler = w.session->sampler(p.stream);
    Request* r = w.request.get();
    if (r != nullptr && r->waiting) {
      r->waiting = false;
      r->first_scheduled = now;
      ++started;
      started_tokens +=
          static_cast<int64_t>(w.session->options().prefix.size());
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.waiting -= static_cast<int>(started);
  stats_.waiting_tokens -= started_tokens;
  stats_.running = scheduler_.num_running();  // with them, for Submit
  stats_.step_started = now;
  stats_.step_objective = step_objective_;
}

void Engine::EndStep(const StepPlan& plan, absl::Time start) {
  DebugDelay(start);
  const absl::Duration took = absl::Now() - start;
  {
    absl::MutexLock lock(&mu_);
    stats_.busy += took;
    stats_.step_started = absl::InfinitePast();
  }
  int decode_tokens = 0, prefill_tokens = 0;
  for (const ScheduledSequence& s : plan.sequences) {
    (s.queue == QueueKind::kPrompt ? prefill_tokens : decode_tokens) +=
        static_cast<int>(s.tokens.size());
  }
  RecordStep(plan, decode_tokens, prefill_tokens, took);
  pacer_.Observe(decode_tokens, prefill_tokens, absl::ToDoubleSeconds(took));
  if (prefill_tokens > 0 && options_.ttft_objective > absl::ZeroDuration()) {
    const double per_token = pacer_.PrefillSeconds(1);
    for (const ScheduledSequence& s : plan.sequences) {
      if (s.queue != QueueKind::kPrompt) continue;
      Work& w = work_.at(s.request_id);
      w.prompt_done += static_cast<int>(s.tokens.size());
      w.prompt_work_s += per_token * static_cast<double>(s.tokens.size());
    }
  }
}

void Engine::FailStep(const StepPlan& plan, const absl::Status& status) {
  const absl::Status error = absl::InternalError(
      absl::StrCat("forward pass failed: ", status.message()));
  for (const ScheduledSequence& s : plan.sequences) {
    Work& w = work_.at(s.request_id);
    if (w.request != nullptr) {
      Finish(w, FinishReason::kNone, error);
    } else {
      FinishSession(*w.session, error);
    }
  }
}

void Engine::ApplyStep(const StepPlan& plan, StepOutput& output,
                       absl::Time now) {
  scheduler_.Update(plan);
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    if (s.samples.empty()) continue;
    Work& w = work_.at(s.request_id);
    const std::vector<bool> reasoning =
        w.session->OnStep(s, output.tokens[i], scheduler_);
    w.session->Touch(now);
    if (w.request != nullptr) OnRequestTokens(w, reasoning);
  }
}

void Engine::DebugDelay(absl::Time start) {
  ++debug_steps_;
  absl::Duration delay = options_.debug_min_step - (absl::Now() - start);
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  if (debug_steps_ == options_.debug_stall_step) delay += options_.debug_stall;
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
}

void Engine::RecordStep(const StepPlan& plan, int decode_tokens,
                        int prefill_tokens, absl::Duration duration) {
  if (metrics_ == nullptr) return;
  const bool prefill = prefill_tokens > 0, decode = decode_tokens > 0;
  const metrics::StepPhase phase = prefill && decode
                                       ? metrics::StepPhase::kMixed
                                   : prefill ? metrics::StepPhase::kPrefill
                                             : metrics::StepPhase::kDecode;
  metrics_->RecordStep(phase, absl::ToDoubleSeconds(duration),
                       static_cast<int>(plan.sequences.size()),
                       plan.num_tokens);
  metrics_->RecordPreemptions(static_cast<int>(plan.preempted.size()));
}

void Engine::OnRequestTokens(Work& w, const std::vector<bool>& reasoning) {
  Request& r = *w.request;
  for (const bool kind : reasoning) {
    const absl::Time now = absl::Now();
    if (r.num_output == 0) {
      r.first_token = now;
    } else if (metrics_ != nullptr) {
      metrics_->RecordInterTokenLatency(
          kind ? metrics::Queue::kReasoning : metrics::Queue::kIo,
          Seconds(r.last_token, now));
    }
    r.last_token = now;
    r.num_reasoning += kind;
    ++r.num_output;
  }
  if (w.session->generating()) return;
  const SessionEvent& end = r.sink->turn_end();
  Finish(w, end.finish_reason, absl::OkStatus(), end.matched_stop);
}

void Engine::Finish(Work& w, FinishReason reason, absl::Status error,
                    std::string matched_stop) {
  const absl::Time now = absl::Now();
  Request& a = *w.request;
  const uint64_t handle = w.session->handle();
  const SessionOptions& o = w.session->options();
  const SessionStreamOptions& out = o.streams[0];
  // What the turn held back for stop strings and partial characters goes
  // out when it ended by itself (the session flushed it at its end).
  const bool flush = error.ok() && reason != FinishReason::kStop &&
                     reason != FinishReason::kCancelled;
  if (flush && !out.reasoning.hide &&
      !a.sink->turn_end().reasoning_text.empty()) {
    // The reasoning stream's partial character (a request that ends while
    // the model thinks), in its own chunk before the final one.
    OutputChunk held;
    held.reasoning = true;
    held.text = a.sink->turn_end().reasoning_text;
    a.sink->out().Push(std::move(held));
  }
  OutputChunk chunk;
  chunk.final = true;
  chunk.finish_reason = reason;
  chunk.matched_stop = std::move(matched_stop);
  if (flush) chunk.text = a.sink->turn_end().text;
  chunk.error = std::move(error);
  chunk.prompt_tokens = static_cast<int>(o.prefix.size());
  chunk.output_tokens = a.num_output;
  chunk.reasoning_tokens = a.num_reasoning;
  chunk.seed = out.sampling.seed;
  if (a.first_scheduled != absl::InfinitePast()) {
    chunk.queue_seconds = Seconds(a.arrival, a.first_scheduled);
  }
  if (a.first_token != absl::InfinitePast()) {
    chunk.time_to_first_token_seconds = Seconds(a.arrival, a.first_token);
  }
  chunk.total_seconds = Seconds(a.arrival, now);
  RecordRequest(a, chunk, reason);
  // Release before telling the client, so a client that sees the final
  // chunk also sees the engine without this request.
  scheduler_.Remove(handle);
  {
    absl::MutexLock lock(&mu_);
    --stats_.requests;
    if (a.arrival != absl::InfinitePast()) {
      stats_.request_time += now - a.arrival;
    }
    if (a.waiting) {
      --stats_.waiting;
      stats_.waiting_tokens -= chunk.prompt_tokens;
    }
    if (!chunk.error.ok()) {
      ++stats_.failed;
    } else if (reason == FinishReason::kCancelled) {
      ++stats_.cancelled;
    } else {
      ++stats_.completed;
    }
  }
  std::shared_ptr<RequestSink> sink = std::move(a.sink);
  work_.erase(handle);  // destroys `w`
  PublishStats();
  sink->out().Push(std::move(chunk));
}

void Engine::RecordRequest(const Request& a, const OutputChunk& chunk,
                           FinishReason reason) {
  if (metrics_ == nullptr) return;
  metrics::RequestSample sample;
  sample.finish_reason = MetricsReason(reason, !chunk.error.ok());
  if (a.first_scheduled != absl::InfinitePast()) {
    sample.queue_seconds = chunk.queue_seconds;
  }
  if (a.first_token != absl::InfinitePast()) {
    sample.time_to_first_token_seconds = chunk.time_to_first_token_seconds;
  }
  sample.e2e_seconds = chunk.total_seconds;
  sample.prompt_tokens = chunk.prompt_tokens;
  sample.reasoning_tokens = a.num_reasoning;
  sample.output_tokens = a.num_output;
  metrics_->RecordRequest(sample);
}

void Engine::PublishStats() {
  const SchedulerStats s = scheduler_.stats();
  absl::MutexLock lock(&mu_);
  busy_ = !work_.empty();
  stats_.sessions = 0;
  for (const auto& [handle, w] : work_) stats_.sessions += w.request == nullptr;
  stats_.kept_sessions = static_cast<int>(kept_.size());
  stats_.running = s.num_running;
  stats_.queue_sizes = s.queue_sizes;
  stats_.queue_running = s.queue_running;
  stats_.kv_blocks_total = s.blocks.num_blocks;
  stats_.kv_blocks_free = s.blocks.num_free_blocks;
  stats_.kv_blocks_cached = s.blocks.num_cached_blocks;
  stats_.steps = s.num_steps;
  stats_.preemptions = s.num_preemptions;
  stats_.computed_tokens = s.num_computed_tokens;
  stats_.prefix_hit_tokens = s.num_prefix_hit_tokens;
}

}  // namespace braid::batching
