#include "batching/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "batching/stop_matcher.h"

namespace braid::batching {
namespace {

double Seconds(absl::Time from, absl::Time to) {
  return absl::ToDoubleSeconds(to - from);
}

}  // namespace

// Engine-thread state of one request.
struct Engine::Sequence {
  Sequence(GenerationRequest r, std::shared_ptr<OutputSink> s, uint64_t h,
           const model::Tokenizer& tokenizer)
      : request(std::move(r)),
        sink(std::move(s)),
        handle(h),
        sampler(request.sampling, request.prompt),
        detokenizer(&tokenizer),
        stop(request.stop) {}

  GenerationRequest request;
  std::shared_ptr<OutputSink> sink;
  uint64_t handle;
  Sampler sampler;
  model::StreamingDetokenizer detokenizer;
  StopMatcher stop;
  std::optional<model::KvCache> kv;
  int num_computed_tokens = 0;  // prompt + output tokens in the KV cache
  std::vector<int32_t> output;
  int32_t next_input = -1;  // last sampled token, fed next step
  absl::Time first_scheduled = absl::InfinitePast();
  absl::Time first_token = absl::InfinitePast();
  bool cancelled = false;
};

Engine::Engine(model::LlamaModel* model, const model::Tokenizer* tokenizer,
               const EngineOptions& options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<uint64_t> Engine::Submit(GenerationRequest request,
                                        std::shared_ptr<OutputSink> sink) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the engine is shutting down");
  if (static_cast<int>(waiting_.size()) >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("waiting queue is full (", options_.max_waiting,
                     " requests, --max_waiting); retry later"));
  }
  const uint64_t handle = next_handle_++;
  auto seq = std::make_unique<Sequence>(std::move(request), std::move(sink),
                                        handle, *tokenizer_);
  // Stable order by priority: after every waiting request of >= priority.
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) {
    return w->request.priority < seq->request.priority;
  });
  waiting_.insert(at, std::move(seq));
  stats_.waiting = static_cast<int>(waiting_.size());
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
    if (shutdown_) return;
    shutdown_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Engine::AdmitLocked() {
  // Cancels apply to waiting and running requests alike.
  for (uint64_t handle : cancels_) {
    for (auto& w : waiting_) {
      if (w->handle == handle) w->cancelled = true;
    }
    for (auto& r : running_) {
      if (r->handle == handle) r->cancelled = true;
    }
  }
  cancels_.clear();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled || shutdown_) {
      running_.push_back(std::move(*it));  // finished as cancelled below
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  while (!waiting_.empty() &&
         static_cast<int>(running_.size()) < options_.max_running) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  stats_.waiting = static_cast<int>(waiting_.size());
}

void Engine::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || !waiting_.empty() || !cancels_.empty() ||
               !running_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (shutdown_) {
        for (auto& r : running_) r->cancelled = true;
      }
      AdmitLocked();
      if (shutdown_ && running_.empty()) return;
    }
    for (auto it = running_.begin(); it != running_.end();) {
      Sequence& seq = **it;
      bool done = false;
      if (seq.cancelled) {
        Finish(seq, FinishReason::kCancelled, absl::OkStatus());
        done = true;
      } else {
        done = Step(seq);
      }
      if (done) {
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

bool Engine::Step(Sequence& seq) {
  const int prompt_len = static_cast<int>(seq.request.prompt.size());
  if (!seq.kv) {
    seq.kv.emplace(model_->NewKvCache(
        prompt_len + static_cast<int>(seq.request.max_tokens)));
    seq.first_scheduled = absl::Now();
    absl::MutexLock lock(&mu_);
    stats_.kv_tokens_reserved += seq.kv->capacity();
    ++stats_.running;
  }
  absl::Span<const int32_t> input;
  if (seq.num_computed_tokens < prompt_len) {
    const int n =
        std::min(options_.prefill_chunk, prompt_len - seq.num_computed_tokens);
    input = absl::MakeConstSpan(seq.request.prompt)
                .subspan(seq.num_computed_tokens, n);
  } else {
    input = absl::MakeConstSpan(&seq.next_input, 1);
  }
  absl::Status status = model_->Forward(input, *seq.kv, false, &logits_);
  if (!status.ok()) {
    Finish(seq, FinishReason::kNone,
           absl::InternalError(
               absl::StrCat("forward pass failed: ", status.message())));
    return true;
  }
  seq.num_computed_tokens += static_cast<int>(input.size());
  if (seq.num_computed_tokens < prompt_len) return false;

  SampledToken token = seq.sampler.Sample(absl::MakeSpan(logits_));
  if (seq.output.empty()) seq.first_token = absl::Now();
  seq.output.push_back(token.token_id);
  seq.next_input = token.token_id;

  const auto& stop_ids = seq.request.stop_token_ids;
  if (std::find(stop_ids.begin(), stop_ids.end(), token.token_id) !=
      stop_ids.end()) {
    Finish(seq, FinishReason::kStop, absl::OkStatus(),
           absl::StrCat(token.token_id));
    return true;
  }
  if (!seq.request.ignore_eos &&
      tokenizer_->IsEndOfGeneration(token.token_id)) {
    Finish(seq, FinishReason::kEos, absl::OkStatus());
    return true;
  }
  if (EmitToken(seq, token)) return true;
  if (static_cast<int64_t>(seq.output.size()) >= seq.request.max_tokens) {
    Finish(seq, FinishReason::kLength, absl::OkStatus());
    return true;
  }
  if (seq.num_computed_tokens >= seq.kv->capacity()) {
    Finish(seq, FinishReason::kContextFull, absl::OkStatus());
    return true;
  }
  return false;
}

bool Engine::EmitToken(Sequence& seq, const SampledToken& token) {
  OutputChunk chunk;
  chunk.token_ids.push_back(token.token_id);
  if (seq.request.sampling.logprobs) chunk.logprobs.push_back(token);
  StopMatcher::Result r = seq.stop.Push(seq.detokenizer.Push(token.token_id));
  chunk.text = std::move(r.text);
  seq.sink->Push(std::move(chunk));
  // A stop string ends the request: its text is dropped, while the tokens
  // that formed it were sent.
  if (r.stopped) Finish(seq, FinishReason::kStop, absl::OkStatus(), r.matched);
  return r.stopped;
}

void Engine::Finish(Sequence& seq, FinishReason reason, absl::Status error,
                    std::string matched_stop) {
  const absl::Time now = absl::Now();
  OutputChunk chunk;
  chunk.final = true;
  chunk.error = std::move(error);
  chunk.finish_reason = reason;
  chunk.matched_stop = std::move(matched_stop);
  if (reason != FinishReason::kStop && reason != FinishReason::kCancelled) {
    // Release what was held back for stop strings and partial characters.
    chunk.text = seq.stop.Flush() + seq.detokenizer.Flush();
  }
  chunk.prompt_tokens = static_cast<int>(seq.request.prompt.size());
  chunk.output_tokens = static_cast<int>(seq.output.size());
  chunk.seed = seq.request.sampling.seed;
  const absl::Time arrival = seq.request.arrival;
  if (seq.first_scheduled != absl::InfinitePast()) {
    chunk.queue_seconds = Seconds(arrival, seq.first_scheduled);
  }
  if (seq.first_token != absl::InfinitePast()) {
    chunk.time_to_first_token_seconds = Seconds(arrival, seq.first_token);
  }
  chunk.total_seconds = Seconds(arrival, now);
  {
    // Release before telling the client, so a client that sees the final
    // chunk also sees the engine without this request.
    absl::MutexLock lock(&mu_);
    if (seq.kv) {
      stats_.kv_tokens_reserved -= seq.kv->capacity();
      --stats_.running;
    }
    ++(reason == FinishReason::kCancelled ? stats_.cancelled
                                          : stats_.completed);
  }
  seq.kv.reset();
  seq.sink->Push(std::move(chunk));
}

}  // namespace braid::batching
