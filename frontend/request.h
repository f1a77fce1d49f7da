// A request as any front end states it (the gRPC API's braid.v1 messages,
// an HTTP JSON body), before validation: plain values, with the API's
// field names in the comments. frontend::RequestBuilder validates them and
// makes engine requests; a front end only parses its wire format into these.
#ifndef BRAID_FRONTEND_REQUEST_H_
#define BRAID_FRONTEND_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::frontend {

// A function call of an assistant message (OpenAI's tool_calls).
struct ToolCallSpec {
  std::string name;
  // The arguments object as the chat template's `tojson` writes it.
  std::string arguments;
};

struct ChatMessageSpec {
  std::string role;     // bytes as received (checked for UTF-8)
  std::string content;  // bytes as received (checked for UTF-8)
  std::vector<ToolCallSpec> tool_calls;
};

// prompt: exactly one kind.
struct PromptSpec {
  enum class Kind { kNone, kText, kTokens, kChat };
  Kind kind = Kind::kNone;
  std::string text;                       // kText: bytes as received
  std::vector<int32_t> tokens;            // kTokens
  std::vector<ChatMessageSpec> messages;  // kChat
  // kChat: the functions the model may call, each as the chat template's
  // `tojson` writes it (model::ChatTemplate::Render).
  std::vector<std::string> tools;
  bool add_generation_prompt = true;  // kChat
  // kChat: braid.v1.ChatContinuation as its number (0: a whole
  // conversation; 1: after a turn that ended with the end-of-generation
  // token, which is in the context; 2: after a turn cut short).
  int continuation = 0;
  // Unset: the model's special tokens on raw text that starts a context.
  std::optional<bool> add_special_tokens;
};

// sampling: every field's zero value is its documented default.
struct SamplingSpec {
  float temperature = 0;  // 0 = greedy
  int32_t top_k = 0;      // 0 = off
  float top_p = 0;        // 0 = unset (1)
  float min_p = 0;
  float repetition_penalty = 0;  // 0 = unset (1)
  float frequency_penalty = 0;
  float presence_penalty = 0;
  std::optional<uint64_t> seed;  // unset: a random one
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int64_t> max_tokens;  // unset: the rest of the context
  int32_t reasoning_budget = 0;       // 0 = no budget
  bool hide_reasoning = false;
};

struct GenerateSpec {
  std::string request_id;
  std::string tenant;
  int32_t priority = 0;
  int64_t tpot_objective_ms = 0;  // 0 = the daemon's
  int64_t ttft_objective_ms = 0;  // 0 = the daemon's
  std::optional<PromptSpec> prompt;
  SamplingSpec sampling;
};

// The API's enums (braid.v1.StreamRole, StreamKind, Visibility,
// DuplexPolicy) as their numbers, so an unknown value reaches validation and
// is named there.
enum StreamRole : int {
  kRoleUnspecified = 0,
  kRoleSystem = 1,
  kRoleUser = 2,
  kRoleTool = 3,
  kRoleReasoning = 4,
  kRoleOutput = 5,
};
enum StreamKind : int {
  kKindUnspecified = 0,
  kKindOutput = 1,
  kKindReasoning = 2,
  kKindInput = 3,
};
enum Visibility : int {
  kVisibilityUnspecified = 0,  // ALL for multi-stream models, else BRANCH
  kVisibilityAll = 1,
  kVisibilityBranch = 2,
};
enum DuplexPolicy : int {
  kDuplexUnspecified = 0,  // INTERJECT
  kDuplexInterject = 1,
  kDuplexInterrupt = 2,
  kDuplexQueue = 3,
};

// open.streams[i]
struct StreamSpec {
  std::string stream_id;
  int role = kRoleUnspecified;  // a StreamRole
  int kind = kKindUnspecified;  // a StreamKind
  int visibility = kVisibilityUnspecified;
  std::optional<SamplingSpec> sampling;  // OUTPUT and REASONING streams
};

// A Session call's open.
struct SessionOpenSpec {
  std::string session_id;
  std::optional<PromptSpec> prefix;
  std::vector<StreamSpec> streams;
  int duplex_policy = kDuplexUnspecified;  // a DuplexPolicy
  int32_t priority = 0;
  std::string tenant;
  bool resume = false;
  int64_t tpot_objective_ms = 0;  // 0 = the daemon's
  int64_t ttft_objective_ms = 0;  // 0 = the daemon's
};

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_REQUEST_H_
