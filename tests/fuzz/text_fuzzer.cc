// libFuzzer target: arbitrary bytes through the text paths of a request,
// on a real SentencePiece vocabulary (model/tokenizer/testdata) and the
// ChatML and Llama 3 templates: encoding (with special tokens parsed),
// decoding the input's bytes as token ids through the streaming
// detokenizer (its output must be the whole decode), and rendering the
// input as chat messages, whole and as a session's continuation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "frontend/request_builder.h"
#include "model/gguf.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/streaming_detokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/fuzz/vocab.h"

namespace {

using braid::model::ChatMessage;
using braid::model::ChatTemplate;

std::unique_ptr<braid::model::Tokenizer> g_tokenizer;
std::vector<ChatTemplate> g_templates;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tokenizer = braid::fuzz::LoadTokenizer();
  for (const char* source :
       {braid::fuzz::kChatMl,
        "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>"
        "' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] "
        "| trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt "
        "%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- "
        "endif %}",
        "qwen2.5"}) {
    auto t = ChatTemplate::FromSource(source, "<s>", "</s>");
    if (t.ok()) g_templates.push_back(*std::move(t));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const braid::model::Tokenizer& tok = *g_tokenizer;
  (void)tok.Encode(text, /*add_special=*/true, /*parse_special=*/true);
  // Pairs of bytes as token ids, streamed: the pieces are valid UTF-8 and,
  // when the whole decode is valid UTF-8, add up to it (SentencePiece's
  // decode drops the space its encoding put before the first token; the
  // stream does not know which token is first in a context).
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < size; i += 2) {
    ids.push_back((data[i] | (data[i + 1] << 8)) % tok.vocab_size());
  }
  braid::model::StreamingDetokenizer stream(&tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Push(id);
  streamed += stream.Flush();
  if (!braid::frontend::IsValidUtf8(streamed)) std::abort();
  const std::string whole = tok.Decode(ids);
  if (braid::frontend::IsValidUtf8(whole) && streamed != whole &&
      streamed != " " + whole) {
    std::abort();
  }
  // The input as messages: split at the first two zero bytes.
  std::vector<ChatMessage> messages;
  size_t start = 0;
  for (const char* role : {"system", "user", "assistant"}) {
    const size_t end = std::min(text.find('\0', start), text.size());
    messages.push_back({role, text.substr(start, end - start)});
    if (end == text.size()) break;
    start = end + 1;
  }
  // And as tools, a call and its result (refused by the families without
  // tool calls).
  std::vector<ChatMessage> with_tools = messages;
  with_tools.push_back({"assistant", "", {{text, text}}});
  with_tools.push_back({"tool", text, {}});
  const std::vector<std::string> tools = {text};
  for (const ChatTemplate& t : g_templates) {
    (void)t.Render(messages, /*add_generation_prompt=*/true);
    (void)t.Render(with_tools, /*add_generation_prompt=*/true, tools);
    (void)t.RenderContinuation({{"user", text}}, true);
  }
  return 0;
}
