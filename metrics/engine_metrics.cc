#include "metrics/engine_metrics.h"

#include <vector>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace braid::metrics {
namespace {

using Buckets = prometheus::Histogram::BucketBoundaries;

// Latency buckets wide enough for a small model on two CPU cores and for a
// GPU: from milliseconds to minutes.
const Buckets& RequestSecondsBuckets() {
  static const Buckets* b = new Buckets{
      0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320};
  return *b;
}
const Buckets& TokenSecondsBuckets() {
  static const Buckets* b =
      new Buckets{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                  0.15,  0.2,    0.3,   0.5,  0.75, 1,    2.5,  5};
  return *b;
}
const Buckets& StepSecondsBuckets() {
  static const Buckets* b =
      new Buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return *b;
}
const Buckets& PowersOfTwo(double max) {
  static const Buckets* small = new Buckets{1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const Buckets* large = new Buckets{
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  return max <= 256 ? *small : *large;
}

const char* PhaseLabel(int phase) {
  static const char* const kNames[] = {"prefill", "decode", "mixed"};
  return kNames[phase];
}

const char* FinishLabel(int reason) {
  static const char* const kNames[] = {"eos",          "length",    "stop",
                                       "context_full", "cancelled", "error"};
  return kNames[reason];
}

const char* RejectionLabel(int rejection) {
  static const char* const kNames[] = {"waiting_requests", "waiting_tokens",
                                       "kv_capacity"};
  return kNames[rejection];
}

prometheus::Histogram* AddHistogram(prometheus::Registry& r,
                                    const std::string& name,
                                    const std::string& help,
                                    const Buckets& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(
      {}, buckets);
}

prometheus::Counter* AddCounter(prometheus::Registry& r,
                                const std::string& name,
                                const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge* AddGauge(prometheus::Registry& r, const std::string& name,
                            const std::string& help,
                            const prometheus::Labels& labels = {}) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(
      labels);
}

}  // namespace

const char* QueueLabel(Queue queue) {
  switch (queue) {
    case Queue::kIo:
      return "io";
    case Queue::kReasoning:
      return "reasoning";
    case Queue::kPrompt:
      return "prompt";
  }
  return "?";
}

EngineMetrics::EngineMetrics(prometheus::Registry& r) {
  RegisterSteps(r);
  RegisterRequests(r);
  RegisterGauges(r);
}

void EngineMetrics::RegisterSteps(prometheus::Registry& r) {
  auto& steps =
      prometheus::BuildHistogram()
          .Name("braid_engine_step_duration_seconds")
          .Help(
              "Duration of one engine step (one forward pass and sampling) "
              "by phase: prefill (prompt chunks only), decode (decode "
              "tokens only) or mixed.")
          .Register(r);
  for (int p = 0; p < 3; ++p) {
    step_seconds_[p] =
        &steps.Add({{"phase", PhaseLabel(p)}}, StepSecondsBuckets());
  }
  step_sequences_ =
      AddHistogram(r, "braid_engine_step_sequences",
                   "Sequences computed in one engine step.", PowersOfTwo(256));
  step_tokens_ = AddHistogram(
      r, "braid_engine_step_tokens",
      "Tokens computed in one engine step (decode tokens plus prefill chunks).",
      PowersOfTwo(16384));
}

void EngineMetrics::RegisterRequests(prometheus::Registry& r) {
  auto& itl = prometheus::BuildHistogram()
                  .Name("braid_inter_token_latency_seconds")
                  .Help(
                      "Time between two consecutive output tokens of a "
                      "request, by the stream queue that produced the "
                      "second: io (visible output) or reasoning.")
                  .Register(r);
  for (int q = 0; q < kNumQueues; ++q) {
    itl_seconds_[q] = &itl.Add({{"queue", QueueLabel(static_cast<Queue>(q))}},
                               TokenSecondsBuckets());
  }
  ttft_seconds_ =
      AddHistogram(r, "braid_time_to_first_token_seconds",
                   "Arrival to first output token (queue time plus prefill).",
                   RequestSecondsBuckets());
  tpot_seconds_ = AddHistogram(
      r, "braid_time_per_output_token_seconds",
      "Per request: (end-to-end - time to first token) / (output tokens - 1).",
      TokenSecondsBuckets());
  e2e_seconds_ = AddHistogram(r, "braid_request_duration_seconds",
                              "Arrival to finish of a generation request.",
                              RequestSecondsBuckets());
  queue_seconds_ = AddHistogram(
      r, "braid_request_queue_time_seconds",
      "Arrival to first scheduled step: time spent waiting in the prompt "
      "queue before any KV block was granted.",
      RequestSecondsBuckets());
  prompt_tokens_ = AddCounter(r, "braid_prompt_tokens_total",
                              "Prompt tokens of finished requests.");
  reasoning_tokens_ =
      AddCounter(r, "braid_reasoning_tokens_total",
                 "Tokens sampled while the model was thinking (between the "
                 "--think_start and --think_end markers).");
  output_tokens_ = AddCounter(r, "braid_output_tokens_total",
                              "Tokens sampled, reasoning tokens included.");
  auto& finished = prometheus::BuildCounter()
                       .Name("braid_requests_finished_total")
                       .Help("Finished generation requests by finish reason.")
                       .Register(r);
  for (int f = 0; f < kNumFinishReasons; ++f) {
    finished_[f] = &finished.Add({{"finish_reason", FinishLabel(f)}});
  }
  preemptions_ =
      AddCounter(r, "braid_preemptions_total",
                 "Requests preempted (KV blocks freed, to be recomputed).");
  auto& rejected = prometheus::BuildCounter()
                       .Name("braid_admission_rejections_total")
                       .Help(
                           "Requests refused with RESOURCE_EXHAUSTED at "
                           "admission, by the bound they hit.")
                       .Register(r);
  for (int j = 0; j < kNumRejections; ++j) {
    rejections_[j] = &rejected.Add({{"bound", RejectionLabel(j)}});
  }
}

void EngineMetrics::RegisterGauges(prometheus::Registry& r) {
  auto& running = prometheus::BuildGauge()
                      .Name("braid_requests_running")
                      .Help(
                          "Requests holding KV blocks, by the stream queue "
                          "that holds their next work.")
                      .Register(r);
  auto& waiting = prometheus::BuildGauge()
                      .Name("braid_requests_waiting")
                      .Help(
                          "Requests holding no KV block (not yet started, "
                          "or preempted), by stream queue.")
                      .Register(r);
  for (int q = 0; q < kNumQueues; ++q) {
    const prometheus::Labels labels = {
        {"queue", QueueLabel(static_cast<Queue>(q))}};
    running_[q] = &running.Add(labels);
    waiting_[q] = &waiting.Add(labels);
  }
  kv_blocks_used_ = AddGauge(r, "braid_kv_blocks_used",
                             "KV cache blocks referenced by requests.");
  kv_blocks_free_ = AddGauge(
      r, "braid_kv_blocks_free",
      "KV cache blocks not referenced (cached prefixes count as free).");
  kv_usage_ratio_ = AddGauge(r, "braid_kv_usage_ratio",
                             "Used KV cache blocks / all blocks (0 to 1).");
  prefix_hit_ratio_ = AddGauge(
      r, "braid_prefix_cache_hit_ratio",
      "Since start: tokens taken from the prefix cache / (those + tokens "
      "computed).");
  num_running_ = AddGauge(
      r, "braid_num_requests_running",
      "Requests holding KV blocks, all queues (vLLM's num_requests_running).");
  num_waiting_ = AddGauge(r, "braid_num_requests_waiting",
                          "Requests waiting for KV blocks, all queues (vLLM's "
                          "num_requests_waiting).");
}

void EngineMetrics::RecordStep(StepPhase phase, double seconds,
                               int num_sequences, int num_tokens) {
  step_seconds_[static_cast<int>(phase)]->Observe(seconds);
  step_sequences_->Observe(num_sequences);
  step_tokens_->Observe(num_tokens);
}

void EngineMetrics::RecordInterTokenLatency(Queue queue, double seconds) {
  itl_seconds_[static_cast<int>(queue)]->Observe(seconds);
}

void EngineMetrics::RecordPreemptions(int count) {
  if (count > 0) preemptions_->Increment(count);
}

void EngineMetrics::RecordRejection(Rejection rejection) {
  rejections_[static_cast<int>(rejection)]->Increment();
}

void EngineMetrics::RecordRequest(const RequestSample& s) {
  finished_[static_cast<int>(s.finish_reason)]->Increment();
  e2e_seconds_->Observe(s.e2e_seconds);
  if (s.queue_seconds >= 0) queue_seconds_->Observe(s.queue_seconds);
  if (s.time_to_first_token_seconds >= 0) {
    ttft_seconds_->Observe(s.time_to_first_token_seconds);
    if (s.output_tokens > 1) {
      tpot_seconds_->Observe((s.e2e_seconds - s.time_to_first_token_seconds) /
                             static_cast<double>(s.output_tokens - 1));
    }
  }
  prompt_tokens_->Increment(static_cast<double>(s.prompt_tokens));
  reasoning_tokens_->Increment(static_cast<double>(s.reasoning_tokens));
  output_tokens_->Increment(static_cast<double>(s.output_tokens));
}

void EngineMetrics::RecordSessionTokens(int64_t prompt, int64_t output,
                                        int64_t reasoning) {
  prompt_tokens_->Increment(static_cast<double>(prompt));
  output_tokens_->Increment(static_cast<double>(output));
  reasoning_tokens_->Increment(static_cast<double>(reasoning));
}

void EngineMetrics::SetGauges(const EngineGauges& g) {
  int running = 0, waiting = 0;
  for (int q = 0; q < kNumQueues; ++q) {
    running_[q]->Set(g.running[q]);
    waiting_[q]->Set(g.waiting[q]);
    running += g.running[q];
    waiting += g.waiting[q];
  }
  const int used = g.kv_blocks_total - g.kv_blocks_free;
  const double usage = g.kv_blocks_total > 0
                           ? static_cast<double>(used) / g.kv_blocks_total
                           : 0.0;
  kv_blocks_used_->Set(used);
  kv_blocks_free_->Set(g.kv_blocks_free);
  kv_usage_ratio_->Set(usage);
  const int64_t looked_up = g.prefix_hit_tokens + g.computed_tokens;
  prefix_hit_ratio_->Set(
      looked_up > 0 ? static_cast<double>(g.prefix_hit_tokens) / looked_up
                    : 0.0);
  num_running_->Set(running);
  num_waiting_->Set(waiting);
}

}  // namespace braid::metrics
