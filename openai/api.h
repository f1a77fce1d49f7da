// The OpenAI API's request bodies (POST /v1/completions and
// /v1/chat/completions) parsed into the front end's specs
// (frontend/request.h). Only JSON types and the API's own shapes are
// checked here; ranges and the prompt are checked by
// frontend::RequestBuilder like a gRPC request's. Unknown fields are
// ignored, as vLLM and llama.cpp's server do (clients send vendor
// extensions); fields braid cannot honour (logit_bias, suffix, a JSON
// response_format, non-text content parts, echo, a forced tool_choice) are
// refused by name.
// Pure functions; thread-safe.
#ifndef BRAID_OPENAI_API_H_
#define BRAID_OPENAI_API_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/request.h"

namespace braid::openai {

enum class Endpoint { kCompletions, kChatCompletions };

// Choices per prompt (`n`) at most.
inline constexpr int kMaxChoices = 16;
// Prompts of one completions request (a batch: `prompt` as an array of
// strings or of token-id arrays) at most.
inline constexpr int kMaxPrompts = 64;

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // empty: the served model
  // Completions: one spec per prompt of the batch; chat: one (kChat).
  std::vector<frontend::PromptSpec> prompts;
  frontend::SamplingSpec sampling;
  int n = 1;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  std::string user;               // the tenant
  int64_t tpot_objective_ms = 0;  // braid's extension; 0 = the daemon's
  int64_t ttft_objective_ms = 0;  // likewise
  // Chat with `tools` (and tool_choice "auto"): the model's <tool_call>
  // blocks are returned as tool_calls (openai/tools.h).
  bool tools = false;
};

// INVALID_ARGUMENT "<field>: <why>" for a body that is not JSON, not an
// object, or has a field of the wrong type or shape. Completions default
// max_tokens to 16 as OpenAI does; chat to the rest of the context.
absl::StatusOr<ApiRequest> ParseRequest(Endpoint endpoint,
                                        absl::string_view body);

// A RequestBuilder error names gRPC fields ("sampling.top_p: ..."); this
// names the JSON body's instead ("top_p: ...").
absl::Status ToApiFields(const absl::Status& status);

}  // namespace braid::openai

#endif  // BRAID_OPENAI_API_H_
