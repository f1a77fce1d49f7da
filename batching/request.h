#ifndef BRAID_BATCHING_REQUEST_H_
#define BRAID_BATCHING_REQUEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "batching/reasoning.h"
#include "batching/sampler.h"

namespace braid::batching {

// A validated generation request as the engine sees it: token ids, not text.
// Built by server/ from the API request; plain value.
struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt;  // non-empty, ids < n_vocab
  SamplingOptions sampling;
  int64_t max_tokens = 1;  // >= 1; prompt + max_tokens <= context length
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int priority = 0;
  std::string tenant;
  absl::Time arrival = absl::InfinitePast();
  // The engine ends the request with DEADLINE_EXCEEDED at the first step
  // after this (the client's deadline or the server's maximum duration).
  absl::Time deadline = absl::InfiniteFuture();
  // Thinking: a budget that forces the end marker, and hiding.
  ReasoningOptions reasoning;
  // The time per output token this request asks for while it decodes
  // (EngineOptions::tpot_objective when zero; SessionOptions::tpot_objective).
  absl::Duration tpot_objective = absl::ZeroDuration();
  // The time to first token it asks for (EngineOptions::ttft_objective when
  // zero; SessionOptions::ttft_objective).
  absl::Duration ttft_objective = absl::ZeroDuration();
};

enum class FinishReason {
  kNone,
  kEos,
  kLength,
  kStop,
  kContextFull,
  kCancelled
};

// One chunk of a request's output. The last chunk has `final` set; a chunk
// with a non-OK `error` is also the last.
struct OutputChunk {
  std::vector<int32_t> token_ids;
  std::string text;                    // whole UTF-8 characters only
  std::vector<SampledToken> logprobs;  // one per token when asked for
  bool reasoning = false;              // tokens of the reasoning stream

  bool final = false;
  absl::Status error;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;
  int prompt_tokens = 0;
  int output_tokens = 0;
  int reasoning_tokens = 0;  // of output_tokens
  uint64_t seed = 0;
  double queue_seconds = 0;
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;
};

// Where the engine delivers a request's output. Implemented by the server's
// per-call reactor. Push is called from the engine thread, must not block,
// and must be thread-safe.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void Push(OutputChunk chunk) = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_REQUEST_H_
