// ChatTemplate: renders a conversation into the prompt text a model was
// trained on, without a Jinja interpreter.
//
// FromSource recognises the model's `tokenizer.chat_template` Jinja source by
// signature, in the spirit of llama.cpp's llm_chat_detect_template, and each
// family is rendered exactly as its reference template renders under
// Hugging Face's settings (trim_blocks, lstrip_blocks). Supported families:
//   chatml      <|im_start|>role\n...<|im_end|>\n  (with the default system
//               message, e.g. SmolLM2's, extracted from the source)
//   qwen2.5     ChatML with tools (Qwen2.5 Instruct): the tools' signatures
//               in the system turn, <tool_call> blocks in assistant turns,
//               tool results as <tool_response> blocks in a user turn
//   llama2      [INST] <<SYS>>...<</SYS>> ... [/INST]   (official Llama-2-chat)
//   llama3      <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
//   mistral-v1  [INST] ... [/INST]...</s>  (Mistral 7B v0.1/v0.2, Mixtral
//               8x7B: no system role)
//   mistral-v3  [INST] ...[/INST] ...</s>  (Mistral 7B v0.3: the system
//               message opens the last user turn)
//   mistral-v7  [SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST]
//   gemma       <start_of_turn>user\n...<end_of_turn>\n  (Gemma 1/2: no
//               system role)
//   gemma3      the same turns, a system message opening the first one
//   zephyr      <|user|>\n...</s>\n
//   phi3        <|user|>\n...<|end|>\n
//   deepseek    ### Instruction:\n...\n### Response:\n...\n<|EOT|>\n
// The rendered text contains special-token text (BOS included where the
// template writes it); tokenize it with parse_special = true and
// add_special = false.
//
// Ownership: a small value type (copyable). Thread-safety: immutable; Render
// is const and safe to call concurrently.

#ifndef BRAID_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
#define BRAID_MODEL_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace braid::model {

// A function call of an assistant turn, as the template writes it.
struct ChatToolCall {
  std::string name;
  // The arguments object as the template's `tojson` filter writes it
  // (Python's json.dumps: ", " and ": " separators, keys in their order,
  // non-ASCII as is).
  std::string arguments;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (chatml also "tool").
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant turns (qwen2.5)
};

class ChatTemplate {
 public:
  enum class Family {
    kChatMl,
    kQwen25,
    kLlama2,
    kLlama3,
    kMistralV1,
    kMistralV3,
    kMistralV7,
    kGemma,
    kGemma3,
    kZephyr,
    kPhi3,
    kDeepSeek,
  };

  // `bos_text`/`eos_text` are the texts of the model's BOS/EOS tokens (the
  // template's bos_token/eos_token). An unrecognised template is
  // InvalidArgument suggesting a raw prompt instead.
  static absl::StatusOr<ChatTemplate> FromSource(std::string jinja_source,
                                                 std::string bos_text,
                                                 std::string eos_text);

  // Renders `messages`; `add_generation_prompt` appends the opening of the
  // assistant's turn. `tools` are the functions the model may call, each
  // as the template's `tojson` writes it (see ChatToolCall::arguments).
  // Unknown roles, and conversations the template itself rejects (e.g.
  // non-alternating roles for llama2/gemma), are InvalidArgument, and so
  // are tools or tool calls for a family without them.
  absl::StatusOr<std::string> Render(
      absl::Span<const ChatMessage> messages, bool add_generation_prompt,
      absl::Span<const std::string> tools = {}) const;
  // Whether the family renders tools and tool calls.
  bool supports_tools() const { return family_ == Family::kQwen25; }

  // `messages` as the next turns of a conversation whose last turn, the
  // assistant's, is already in the context (a session): what Render adds to
  // the whole conversation after that turn's text, the template's closing of
  // the turn first. No BOS and no default system message. InvalidArgument
  // when the template renders earlier turns differently once later ones
  // follow (mistral-v3 moves the system message to the last user turn), so
  // that a conversation cannot be continued, or rejects the messages.
  absl::StatusOr<std::string> RenderContinuation(
      absl::Span<const ChatMessage> messages, bool add_generation_prompt) const;

  // Family name as listed above ("chatml", "llama3", ...).
  std::string_view name() const;
  Family family() const { return family_; }
  // The default system message the template inserts, if any.
  const std::optional<std::string>& default_system() const {
    return default_system_;
  }

 private:
  ChatTemplate(Family family, std::optional<std::string> default_system,
               std::string bos_text, std::string eos_text)
      : family_(family),
        default_system_(std::move(default_system)),
        bos_(std::move(bos_text)),
        eos_(std::move(eos_text)) {}

  // gemma, and gemma3 (system_separator_ set).
  absl::StatusOr<std::string> RenderGemmaTurns(absl::Span<const ChatMessage> m,
                                               bool gen) const;

  absl::StatusOr<std::string> RenderChatMl(absl::Span<const ChatMessage> m,
                                           bool gen) const;
  absl::StatusOr<std::string> RenderQwen25(
      absl::Span<const ChatMessage> m, bool gen,
      absl::Span<const std::string> tools) const;
  absl::StatusOr<std::string> RenderLlama2(absl::Span<const ChatMessage> m,
                                           bool gen) const;
  absl::StatusOr<std::string> RenderLlama3(absl::Span<const ChatMessage> m,
                                           bool gen) const;
  absl::StatusOr<std::string> RenderMistralV1(absl::Span<const ChatMessage> m,
                                              bool gen) const;
  absl::StatusOr<std::string> RenderMistralV3(absl::Span<const ChatMessage> m,
                                              bool gen) const;
  absl::StatusOr<std::string> RenderMistralV7(absl::Span<const ChatMessage> m,
                                              bool gen) const;
  absl::StatusOr<std::string> RenderZephyr(absl::Span<const ChatMessage> m,
                                           bool gen) const;
  absl::StatusOr<std::string> RenderPhi3(absl::Span<const ChatMessage> m,
                                         bool gen) const;
  absl::StatusOr<std::string> RenderDeepSeek(absl::Span<const ChatMessage> m,
                                             bool gen) const;

  Family family_;
  // chatml, qwen2.5, deepseek: the system text the template inserts.
  std::optional<std::string> default_system_;
  // gemma3: what follows a system message's text in the first turn
  // (first_user_prefix's suffix); unset: no system role (gemma).
  std::optional<std::string> system_separator_;
  std::string bos_;
  std::string eos_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
