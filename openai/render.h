// The OpenAI API's response bodies: streamed chunks (server-sent events),
// whole responses, usage, and errors in OpenAI's shape with the HTTP
// status that matches the error's code.
#ifndef BRAID_OPENAI_RENDER_H_
#define BRAID_OPENAI_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "batching/request.h"
#include "model/tokenizer/tokenizer.h"
#include "openai/api.h"
#include "openai/run.h"
#include "openai/tools.h"

namespace braid::openai {

// 400 invalid argument / out of range / failed precondition, 401, 403, 404,
// 408 (request too slow to arrive), 413, 429 resource exhausted, 499
// cancelled (the client went away), 503 unavailable, 504 deadline exceeded,
// 500 otherwise.
int HttpStatusOf(const absl::Status& status);

// {"error": {"message", "type", "param", "code"}}: `param` is the field an
// INVALID_ARGUMENT message names ("top_p: must be ...").
std::string ErrorBody(const absl::Status& status);

// "stop" (EOS, a stop string or token), "length" (max_tokens, the context).
const char* FinishReasonName(batching::FinishReason reason);

// What every chunk and response of one request repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  // Chat with tools: <tool_call> blocks of the output are tool_calls
  // (openai/tools.h), and a choice that made calls finishes "tool_calls".
  bool tools = false;
  const model::Tokenizer* tokenizer = nullptr;  // token strings
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int reasoning_tokens = 0;
};

// Renders a streamed response, one SSE event ("data: {...}\n\n") per
// choice event: chat chunks carry the role on a choice's first delta,
// reasoning as `reasoning_content`, each tool call whole in a delta of its
// own once its block has closed; a choice's last event carries its
// finish_reason. Not thread-safe (one per request).
class StreamRenderer {
 public:
  StreamRenderer(ResponseMeta meta, int num_choices);
  // Appends the events for `event` to `out`.
  void Add(const ChoiceEvent& event, std::string* out);
  // The usage chunk (stream_options.include_usage): no choices.
  std::string UsageEvent(int prompt_tokens) const;
  // An error after the response started: an event with the error object.
  static std::string ErrorEvent(const absl::Status& status);
  static constexpr const char* kDone = "data: [DONE]\n\n";

 private:
  // A choice's text and tokens (its role first, in chat), if any.
  void AddDelta(const ChoiceEvent& e, std::string* out);
  // A choice's last chunk: its finish reason.
  void AddFinish(const ChoiceEvent& e, int num_calls, std::string* out);

  ResponseMeta meta_;
  std::vector<bool> started_;        // chat: the role was sent
  std::vector<ToolCallSplitter> splitters_;  // meta_.tools: per choice
  std::vector<int64_t> text_bytes_;  // completions: text_offset
  Usage usage_;
};

// Collects a whole response (stream: false).
class ResponseCollector {
 public:
  ResponseCollector(ResponseMeta meta, int num_choices);
  void Add(const ChoiceEvent& event);
  std::string Body(int prompt_tokens) const;

 private:
  struct Choice {
    std::string text, reasoning;
    std::vector<batching::SampledToken> logprobs;
    std::vector<int64_t> offsets;  // completions: text_offset per token
    batching::FinishReason finish = batching::FinishReason::kNone;
    int output_tokens = 0, reasoning_tokens = 0;
  };
  ResponseMeta meta_;
  std::vector<Choice> choices_;
};

}  // namespace braid::openai

#endif  // BRAID_OPENAI_RENDER_H_
