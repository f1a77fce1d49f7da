// Function calling in the OpenAI API (chat completions with `tools`) for
// models whose chat template asks for calls as <tool_call> blocks of JSON
// (model::ChatTemplate's qwen2.5 family, the Hermes form):
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// JSON goes into the template as Hugging Face's `tojson` filter writes it
// (PyJson), and calls come out of the model's text as the API's
// `tool_calls` (ToolCallSplitter). Pure; thread-compatible.
#ifndef BRAID_OPENAI_TOOLS_H_
#define BRAID_OPENAI_TOOLS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace braid::openai {

// `v` as Python's json.dumps(v, ensure_ascii=False) writes it: ", " and
// ": " separators, object keys in their order, non-ASCII characters as they
// are, control characters escaped.
std::string PyJson(const nlohmann::ordered_json& v);

// One call the model made: `arguments` is the arguments object as JSON text
// (the API's string), `id` unique within the response.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

// Splits a choice's text, as it streams, into content and calls. A
// <tool_call> block whose JSON is an object with a string "name" (and
// "arguments", an object, or none) becomes a call; any other block stays
// content, as does text outside blocks. Text that may be the start of a
// block is held until it is known, so no part of a call is ever sent as
// content.
class ToolCallSplitter {
 public:
  // Call ids are `id_prefix` and the call's number.
  explicit ToolCallSplitter(std::string id_prefix);

  struct Piece {
    std::string content;
    std::vector<ToolCall> calls;
  };
  // More of the choice's text: the content now known and the calls closed.
  Piece Push(absl::string_view text);
  // The end of the text: what is held (an open block, a partial opening)
  // is content.
  Piece Finish();
  int num_calls() const { return num_calls_; }

 private:
  void Scan(Piece* out);
  // The call in a block's text, if it is one.
  bool ParseCall(absl::string_view body, ToolCall* call);

  const std::string id_prefix_;
  std::string held_;       // unsent text: a possible opening, or an open block
  bool in_block_ = false;  // held_ starts with the opening tag
  bool after_call_ = false;  // whitespace right after a call is dropped
  int num_calls_ = 0;
};

// The whole text at once: its content with the calls taken out (and the
// whitespace around them), and the calls.
ToolCallSplitter::Piece SplitToolCalls(absl::string_view text,
                                       std::string id_prefix);

}  // namespace braid::openai

#endif  // BRAID_OPENAI_TOOLS_H_
