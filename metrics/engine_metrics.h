// The engine's metrics: what the step loop records (step durations and
// sizes, per-token latency, finished requests, preemptions, admission
// rejections) and the gauges of its state (requests per queue and in all,
// KV blocks, prefix cache), under braid's own `braid_` names (the ones with
// vLLM's meanings are listed in docs/OPERATIONS.md).
//
// The engine holds a nullable pointer to one of these and calls the Record
// methods from its thread; SetGauges is called by whoever polls the engine's
// stats. Every label value comes from a fixed set (queue names, step phases,
// finish reasons, rejection bounds), never from a request.
//
// Built on a registry that outlives it. Thread-safe (prometheus-cpp metrics
// are atomic).
#ifndef BRAID_METRICS_ENGINE_METRICS_H_
#define BRAID_METRICS_ENGINE_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace braid::metrics {

// The three stream queues, in batching::QueueKind's order.
enum class Queue { kIo = 0, kReasoning = 1, kPrompt = 2 };
inline constexpr int kNumQueues = 3;
const char* QueueLabel(Queue queue);  // "io", "reasoning", "prompt"

// A step that computed only prefill chunks, only decode tokens, or both.
enum class StepPhase { kPrefill = 0, kDecode = 1, kMixed = 2 };

enum class FinishReason {
  kEos = 0,
  kLength,
  kStop,
  kContextFull,
  kCancelled,
  kError,
};
inline constexpr int kNumFinishReasons = 6;

// The admission bound a rejected request hit.
enum class Rejection {
  kWaitingRequests = 0,  // --max_waiting_requests
  kWaitingTokens,        // --max_waiting_tokens
  kKvCapacity,           // larger than the whole KV pool
};
inline constexpr int kNumRejections = 3;

// One finished request. Negative times mean "never happened" (a request
// cancelled before it was scheduled has no queue time).
struct RequestSample {
  FinishReason finish_reason = FinishReason::kError;
  double queue_seconds = -1;  // arrival -> first scheduled
  double time_to_first_token_seconds = -1;
  double e2e_seconds = 0;  // arrival -> finished
  int64_t prompt_tokens = 0;
  int64_t reasoning_tokens = 0;  // sampled while the model was thinking
  int64_t output_tokens = 0;     // every sampled token, reasoning included
};

// A snapshot of the engine's state for the gauges.
struct EngineGauges {
  // Per queue (Queue order): requests holding KV blocks / holding none.
  std::array<int, kNumQueues> running = {};
  std::array<int, kNumQueues> waiting = {};
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;  // unreferenced (cached content counts as free)
  // Totals since start, for the prefix-cache hit ratio.
  int64_t prefix_hit_tokens = 0;
  int64_t computed_tokens = 0;
};

class EngineMetrics {
 public:
  explicit EngineMetrics(prometheus::Registry& registry);

  void RecordStep(StepPhase phase, double seconds, int num_sequences,
                  int num_tokens);
  // Time between two consecutive tokens of one request; `queue` is the
  // queue whose work produced the second one.
  void RecordInterTokenLatency(Queue queue, double seconds);
  void RecordPreemptions(int count);
  void RecordRejection(Rejection rejection);
  void RecordRequest(const RequestSample& sample);
  // A session's tokens, into the same token counters as requests': prompt
  // (its prefix, its input), output and reasoning (of a turn, at its end).
  void RecordSessionTokens(int64_t prompt, int64_t output, int64_t reasoning);
  void SetGauges(const EngineGauges& gauges);

 private:
  // The constructor's parts: step, per-request and gauge families.
  void RegisterSteps(prometheus::Registry& r);
  void RegisterRequests(prometheus::Registry& r);
  void RegisterGauges(prometheus::Registry& r);

  // Per-label-value children, resolved once (Family::Add takes a lock).
  std::array<prometheus::Histogram*, 3> step_seconds_;
  prometheus::Histogram* step_sequences_;
  prometheus::Histogram* step_tokens_;
  std::array<prometheus::Histogram*, kNumQueues> itl_seconds_;
  prometheus::Histogram* ttft_seconds_;
  prometheus::Histogram* tpot_seconds_;
  prometheus::Histogram* e2e_seconds_;
  prometheus::Histogram* queue_seconds_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* reasoning_tokens_;
  prometheus::Counter* output_tokens_;
  std::array<prometheus::Counter*, kNumFinishReasons> finished_;
  prometheus::Counter* preemptions_;
  std::array<prometheus::Counter*, kNumRejections> rejections_;
  std::array<prometheus::Gauge*, kNumQueues> running_;
  std::array<prometheus::Gauge*, kNumQueues> waiting_;
  prometheus::Gauge* kv_blocks_used_;
  prometheus::Gauge* kv_blocks_free_;
  prometheus::Gauge* kv_usage_ratio_;
  prometheus::Gauge* prefix_hit_ratio_;
  prometheus::Gauge* num_running_;
  prometheus::Gauge* num_waiting_;
};

}  // namespace braid::metrics

#endif  // BRAID_METRICS_ENGINE_METRICS_H_
