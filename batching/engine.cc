#include "batching/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "batching/stop_matcher.h"
#include "model/tokenizer/streaming_detokenizer.h"

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

}  // namespace

// Engine-thread state of one request (built by Submit, then owned by the
// engine thread).
struct Engine::Active {
  Active(GenerationRequest r, std::shared_ptr<OutputSink> s, uint64_t h,
         const model::Tokenizer& tokenizer, const ReasoningMarkers& markers)
      : request(std::move(r)),
        sink(std::move(s)),
        handle(h),
        sampler(request.sampling, request.prompt),
        detokenizer(&tokenizer),
        reasoning_detokenizer(&tokenizer),
        stop(request.stop),
        gate(markers, request.reasoning, request.prompt) {}

  GenerationRequest request;
  std::shared_ptr<OutputSink> sink;
  uint64_t handle;
  Sampler sampler;
  model::StreamingDetokenizer detokenizer;
  model::StreamingDetokenizer reasoning_detokenizer;
  StopMatcher stop;
  ReasoningGate gate;
  int num_output = 0;
  int num_reasoning = 0;  // of num_output, sampled by reasoning-queue work
  bool waiting = true;    // counted by admission control
  absl::Time first_scheduled = absl::InfinitePast();
  absl::Time first_token = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
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
  inbox_.push_back(std::make_unique<Active>(std::move(request), std::move(sink),
                                            handle, *tokenizer_,
                                            options_.reasoning));
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
    if (!active_.empty() || !sessions_.empty()) RunStep();
    PublishStats();
  }
  PublishStats();
}

bool Engine::DrainInbox() {
  std::vector<std::unique_ptr<Active>> incoming;
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
  for (auto& a : incoming) {
    const uint64_t id = a->handle;
    scheduler_.Add(id, a->request.prompt, a->request.priority,
                   a->request.tenant);
    active_[id] = std::move(a);
  }
  for (uint64_t id : cancels) {
    auto it = active_.find(id);
    if (it != active_.end()) {
      Finish(*it->second, FinishReason::kCancelled, absl::OkStatus());
    }
    auto sit = sessions_.find(id);
    if (sit != sessions_.end()) {
      FinishSession(*sit->second,
                    absl::CancelledError("the session was cancelled"));
    }
  }
  ExpireDeadlines();
  ExpireIdleSessions(absl::Now());
  if (shutdown) {
    while (!active_.empty()) {
      Finish(*active_.begin()->second, FinishReason::kCancelled,
             absl::OkStatus());
    }
    while (!sessions_.empty()) {
      FinishSession(*sessions_.begin()->second,
                    absl::UnavailableError("the engine is shutting down"));
    }
  }
  return !shutdown;
}

void Engine::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  std::vector<Active*> expired;
  for (auto& [id, a] : active_) {
    if (a->request.deadline <= now) expired.push_back(a.get());
  }
  for (Active* a : expired) {
    Finish(*a, FinishReason::kNone,
           absl::DeadlineExceededError(absl::StrCat(
               "deadline exceeded after ", a->num_output,
               " output tokens (the client's deadline or the server's "
               "--max_request_seconds)")));
  }
}

void Engine::RunStep() {
  scheduler_.SetPacedPrefillCap(pacer_.Cap());
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

void Engine::StartStep(StepPlan& plan, absl::Time now) {
  int64_t started = 0, started_tokens = 0;
  for (ScheduledSequence& s : plan.sequences) {
    if (auto it = sessions_.find(s.request_id); it != sessions_.end()) {
      for (SamplePoint& p : s.samples)
        p.sampler = it->second->sampler(p.stream);
      continue;
    }
    Active& a = *active_.at(s.request_id);
    for (SamplePoint& p : s.samples) p.sampler = &a.sampler;
    if (a.waiting) {
      a.waiting = false;
      a.first_scheduled = now;
      ++started;
      started_tokens += static_cast<int64_t>(a.request.prompt.size());
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.waiting -= static_cast<int>(started);
  stats_.waiting_tokens -= started_tokens;
  stats_.running = scheduler_.num_running();  // with them, for Submit
  stats_.step_started = now;
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
}

void Engine::FailStep(const StepPlan& plan, const absl::Status& status) {
  const absl::Status error = absl::InternalError(
      absl::StrCat("forward pass failed: ", status.message()));
  for (const ScheduledSequence& s : plan.sequences) {
    if (auto it = sessions_.find(s.request_id); it != sessions_.end()) {
      FinishSession(*it->second, error);
    } else {
      Finish(*active_.at(s.request_id), FinishReason::kNone, error);
    }
  }
}

void Engine::ApplyStep(const StepPlan& plan, StepOutput& output,
                       absl::Time now) {
  // Thinking: a spent reasoning budget forces the end marker in place of
  // the sampled token, before the scheduler appends it. (A session's
  // streams have gates of their own, Session::OnStep.)
  std::vector<ReasoningGate::Decision> decisions(plan.sequences.size());
  std::vector<Session*> sessions(plan.sequences.size(), nullptr);
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const uint64_t id = plan.sequences[i].request_id;
    if (auto it = sessions_.find(id); it != sessions_.end()) {
      sessions[i] = it->second.get();
      continue;
    }
    if (output.tokens[i].empty()) continue;
    SampledToken& t = output.tokens[i][0];
    decisions[i] = active_.at(id)->gate.Next(t.token_id);
    if (decisions[i].forced) {
      t.token_id = decisions[i].token;
      t.logprob = 0;
      t.top.clear();
    }
  }
  scheduler_.Update(plan, output);
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    if (sessions[i] != nullptr) {
      if (!s.samples.empty()) {
        sessions[i]->OnStep(s, output.tokens[i], scheduler_);
        sessions[i]->Touch(now);
      }
    } else if (!output.tokens[i].empty()) {
      OnToken(*active_.at(s.request_id), output.tokens[i][0],
              decisions[i].reasoning);
    }
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

void Engine::OnToken(Active& a, const SampledToken& token, bool reasoning) {
  const QueueKind queue = reasoning ? QueueKind::kReasoning : QueueKind::kIo;
  const absl::Time now = absl::Now();
  if (a.num_output == 0) {
    a.first_token = now;
  } else if (metrics_ != nullptr) {
    metrics_->RecordInterTokenLatency(static_cast<metrics::Queue>(queue),
                                      Seconds(a.last_token, now));
  }
  a.last_token = now;
  if (reasoning) ++a.num_reasoning;
  ++a.num_output;
  const auto& stop_ids = a.request.stop_token_ids;
  if (std::find(stop_ids.begin(), stop_ids.end(), token.token_id) !=
      stop_ids.end()) {
    Finish(a, FinishReason::kStop, absl::OkStatus(),
           absl::StrCat(token.token_id));
    return;
  }
  if (!a.request.ignore_eos && tokenizer_->IsEndOfGeneration(token.token_id)) {
    Finish(a, FinishReason::kEos, absl::OkStatus());
    return;
  }
  OutputChunk chunk;
  chunk.token_ids.push_back(token.token_id);
  if (a.request.sampling.logprobs) chunk.logprobs.push_back(token);
  if (reasoning) {
    // The reasoning stream: its own text, no stop strings; hidden on
    // request (the tokens still count).
    chunk.reasoning = true;
    chunk.text = a.reasoning_detokenizer.Push(token.token_id);
    if (!a.request.reasoning.hide) a.sink->Push(std::move(chunk));
    if (a.num_output >= a.request.max_tokens) {
      Finish(a, FinishReason::kLength, absl::OkStatus());
    }
    return;
  }
  StopMatcher::Result r = a.stop.Push(a.detokenizer.Push(token.token_id));
  chunk.text = std::move(r.text);
  a.sink->Push(std::move(chunk));
  // A stop string ends the request: its text is dropped, while the tokens
  // that formed it were sent.
  if (r.stopped) {
    Finish(a, FinishReason::kStop, absl::OkStatus(), r.matched);
  } else if (a.num_output >= a.request.max_tokens) {
    Finish(a, FinishReason::kLength, absl::OkStatus());
  } else if (static_cast<int>(a.request.prompt.size()) + a.num_output >=
             options_.max_context_tokens) {
    Finish(a, FinishReason::kContextFull, absl::OkStatus());
  }
}

void Engine::Finish(Active& a, FinishReason reason, absl::Status error,
                    std::string matched_stop) {
  const absl::Time now = absl::Now();
  const bool flush = error.ok() && reason != FinishReason::kStop &&
                     reason != FinishReason::kCancelled;
  if (flush && !a.request.reasoning.hide) {
    // The reasoning stream's partial character (a request that ends while
    // the model thinks), in its own chunk before the final one.
    OutputChunk held;
    held.reasoning = true;
    held.text = a.reasoning_detokenizer.Flush();
    if (!held.text.empty()) a.sink->Push(std::move(held));
  }
  OutputChunk chunk;
  chunk.final = true;
  chunk.finish_reason = reason;
  chunk.matched_stop = std::move(matched_stop);
  if (flush) {
    // Release what was held back for stop strings and partial characters.
    chunk.text = a.stop.Flush() + a.detokenizer.Flush();
  }
  chunk.error = std::move(error);
  chunk.prompt_tokens = static_cast<int>(a.request.prompt.size());
  chunk.output_tokens = a.num_output;
  chunk.reasoning_tokens = a.num_reasoning;
  chunk.seed = a.request.sampling.seed;
  const absl::Time arrival = a.request.arrival;
  if (a.first_scheduled != absl::InfinitePast()) {
    chunk.queue_seconds = Seconds(arrival, a.first_scheduled);
  }
  if (a.first_token != absl::InfinitePast()) {
    chunk.time_to_first_token_seconds = Seconds(arrival, a.first_token);
  }
  chunk.total_seconds = Seconds(arrival, now);
  if (metrics_ != nullptr) {
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
  // Release before telling the client, so a client that sees the final
  // chunk also sees the engine without this request.
  scheduler_.Remove(a.handle);
  {
    absl::MutexLock lock(&mu_);
    --stats_.requests;
    if (arrival != absl::InfinitePast()) stats_.request_time += now - arrival;
    if (a.waiting) {
      --stats_.waiting;
      stats_.waiting_tokens -= static_cast<int64_t>(a.request.prompt.size());
    }
    if (!chunk.error.ok()) {
      ++stats_.failed;
    } else if (reason == FinishReason::kCancelled) {
      ++stats_.cancelled;
    } else {
      ++stats_.completed;
    }
  }
  std::shared_ptr<OutputSink> sink = std::move(a.sink);
  active_.erase(a.handle);  // destroys `a`
  PublishStats();
  sink->Push(std::move(chunk));
}

void Engine::PublishStats() {
  const SchedulerStats s = scheduler_.stats();
  absl::MutexLock lock(&mu_);
  busy_ = !active_.empty() || !sessions_.empty();
  stats_.sessions = static_cast<int>(sessions_.size());
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
