#include "model/tokenizer/chat_template.h"

#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace braid::model {
namespace {

using Family = ChatTemplate::Family;

absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Python's str.isspace(), which Jinja's trim filter and str.strip() use.
bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) ||
         cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Python's str.strip() with no arguments.
std::string PyStrip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    const size_t len = ValidUtf8Length(text, begin);
    if (len == 0 || !IsPySpace(DecodeUtf8(text, begin, len))) break;
    begin += len;
  }
  while (end > begin) {
    size_t start = end - 1;  // Back up to the start of the last character.
    while (start > begin &&
           (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    const size_t len = ValidUtf8Length(text, start);
    if (len != end - start || !IsPySpace(DecodeUtf8(text, start, len))) break;
    end = start;
  }
  return std::string(text.substr(begin, end - begin));
}

// Reads the Jinja/Python string literal whose opening quote is at
// source[quote]; returns its unescaped value.
std::optional<std::string> ReadStringLiteral(std::string_view source,
                                             size_t quote) {
  const char q = source[quote];
  std::string value;
  for (size_t i = quote + 1; i < source.size(); ++i) {
    const char c = source[i];
    if (c == q) return value;
    if (c != '\\' || i + 1 == source.size()) {
      value.push_back(c);
      continue;
    }
    const char e = source[++i];
    switch (e) {
      case 'n':
        value.push_back('\n');
        break;
      case 't':
        value.push_back('\t');
        break;
      case 'r':
        value.push_back('\r');
        break;
      default:
        value.push_back(e);
        break;  // \\ \' \" and the rest.
    }
  }
  return std::nullopt;
}

// Every string literal in `source` whose source text starts with `prefix`.
std::vector<std::string> StringLiteralsWithPrefix(std::string_view source,
                                                  std::string_view prefix) {
  std::vector<std::string> found;
  for (size_t pos = source.find(prefix); pos != std::string_view::npos;
       pos = source.find(prefix, pos + 1)) {
    if (pos == 0 || (source[pos - 1] != '\'' && source[pos - 1] != '"')) {
      continue;
    }
    std::optional<std::string> value = ReadStringLiteral(source, pos - 1);
    if (value.has_value()) found.push_back(*std::move(value));
  }
  return found;
}

// ChatML templates that open with a fixed system turn when the conversation
// has none carry it as one literal: '<|im_start|>system\n...<|im_end|>\n'.
std::optional<std::string> ChatMlDefaultSystem(std::string_view source) {
  constexpr std::string_view kOpen = "<|im_start|>system\n";
  constexpr std::string_view kClose = "<|im_end|>\n";
  // Search for the unescaped part: the newline may be written as "\n".
  for (const std::string& literal :
       StringLiteralsWithPrefix(source, "<|im_start|>system")) {
    if (absl::StartsWith(literal, AsAbsl(kOpen)) &&
        literal.size() > kOpen.size() + kClose.size() &&
        absl::EndsWith(literal, AsAbsl(kClose))) {
      return literal.substr(kOpen.size(),
                            literal.size() - kOpen.size() - kClose.size());
    }
  }
  return std::nullopt;
}

// DeepSeek-Coder writes its default system text when no system message is
// found: {%- if not ns.found -%}{{'You are ...\n'}}.
std::optional<std::string> DeepSeekDefaultSystem(std::string_view source) {
  const size_t at = source.find("not ns.found");
  if (at == std::string_view::npos) return std::nullopt;
  const size_t quote = source.find_first_of("'\"", at);
  if (quote == std::string_view::npos) return std::nullopt;
  return ReadStringLiteral(source, quote);
}

// Gemma 3 opens its first turn with the system text and a separator:
// first_user_prefix = messages[0]['content'] + '\n\n'.
std::string Gemma3SystemSeparator(std::string_view source) {
  constexpr std::string_view kAt =
      "first_user_prefix = messages[0]['content'] +";
  const size_t at = source.find(kAt);
  if (at != std::string_view::npos) {
    const size_t quote = source.find_first_of("'\"", at + kAt.size());
    if (quote != std::string_view::npos) {
      std::optional<std::string> sep = ReadStringLiteral(source, quote);
      if (sep.has_value()) return *std::move(sep);
    }
  }
  return "\n\n";
}

// Qwen2.5 Instruct's ChatML with tools: the tools' signatures in the
// system turn, calls as <tool_call> JSON, results as <tool_response>. Its
// default system text stands in both branches of the system turn; Qwen3's
// template (reasoning_content, <think>) is another and reads as chatml.
bool IsQwen25Tools(std::string_view src) {
  if (!Contains(src, "<tools>") || !Contains(src, "<tool_call>") ||
      !Contains(src, "<tool_response>") ||
      !Contains(src, "tool_call.arguments | tojson") ||
      Contains(src, "reasoning_content")) {
    return false;
  }
  const std::optional<std::string> system = ChatMlDefaultSystem(src);
  return system.has_value() &&
         Contains(src, absl::StrCat("{{- '", *system, "' }}"));
}

struct FamilyName {
  Family family;
  std::string_view name;
};
constexpr FamilyName kFamilyNames[] = {
    {Family::kChatMl, "chatml"},
    {Family::kQwen25, "qwen2.5"},
    {Family::kLlama2, "llama2"},
    {Family::kLlama3, "llama3"},
    {Family::kMistralV1, "mistral-v1"},
    {Family::kMistralV3, "mistral-v3"},
    {Family::kMistralV7, "mistral-v7"},
    {Family::kGemma, "gemma"},
    {Family::kGemma3, "gemma3"},
    {Family::kZephyr, "zephyr"},
    {Family::kPhi3, "phi3"},
    {Family::kDeepSeek, "deepseek"},
};

// Signature checks, in llama.cpp's llm_chat_detect_template order.
std::optional<Family> DetectFamily(std::string_view src) {
  for (const FamilyName& f : kFamilyNames) {
    if (src == f.name) return f.family;  // A bare family name is accepted.
  }
  if (Contains(src, "<|im_start|>")) {
    // Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) only look alike.
    if (Contains(src, "<|im_sep|>") || Contains(src, "<end_of_utterance>")) {
      return std::nullopt;
    }
    return IsQwen25Tools(src) ? Family::kQwen25 : Family::kChatMl;
  }
  if (Contains(src, "[INST]")) {
    if (Contains(src, "[SYSTEM_PROMPT]")) return Family::kMistralV7;
    if (Contains(src, "user_messages[-1]") &&
        Contains(src, R"("[INST] " + message["content"] + "[/INST]")")) {
      return Family::kMistralV3;
    }
    if (!Contains(src, "<<SYS>>") &&
        Contains(src, "'[INST] ' + message['content'] + ' [/INST]'")) {
      return Family::kMistralV1;
    }
    if (Contains(src, "<<SYS>>") && Contains(src, "content.strip()") &&
        Contains(src, "bos_token + '[INST]")) {
      return Family::kLlama2;
    }
    return std::nullopt;  // Mistral v1/v3 and llama2 variants: not rendered.
  }
  if (Contains(src, "<|assistant|>") && Contains(src, "<|end|>")) {
    return Family::kPhi3;
  }
  if (Contains(src, "<|user|>") && Contains(src, "<|assistant|>") &&
      Contains(src, "eos_token")) {
    return Family::kZephyr;
  }
  if (Contains(src, "<start_of_turn>")) {
    return Contains(src, "first_user_prefix") ? Family::kGemma3
                                              : Family::kGemma;
  }
  if (Contains(src, "### Instruction:") && Contains(src, "<|EOT|>")) {
    return Family::kDeepSeek;
  }
  if (Contains(src, "<|start_header_id|>") &&
      Contains(src, "<|end_header_id|>")) {
    return Family::kLlama3;
  }
  return std::nullopt;
}

absl::Status CheckRoles(absl::Span<const ChatMessage> messages,
                        std::initializer_list<std::string_view> allowed,
                        std::string_view family) {
  for (const ChatMessage& m : messages) {
    bool ok = false;
    for (std::string_view role : allowed) ok = ok || m.role == role;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid chat role '", m.role, "' for the ",
                       AsAbsl(family), " template"));
    }
  }
  return absl::OkStatus();
}

// The "roles must alternate user/assistant" rule of llama2 and gemma.
absl::Status CheckAlternation(absl::Span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if ((messages[i].role == "user") != (i % 2 == 0)) {
      return absl::InvalidArgumentError(
          "conversation roles must alternate user/assistant/user/...");
    }
  }
  return absl::OkStatus();
}

// llama2 and gemma read messages[0] unconditionally, so upstream they fail
// on an empty conversation.
absl::Status EmptyConversationError(std::string_view family) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the ", AsAbsl(family), " template needs at least one message"));
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string jinja_source,
                                                      std::string bos_text,
                                                      std::string eos_text) {
  const std::optional<Family> family = DetectFamily(jinja_source);
  if (!family.has_value()) {
    return absl::InvalidArgumentError(
        "unrecognised chat template (supported: chatml, qwen2.5, llama2, "
        "llama3, mistral-v1, mistral-v3, mistral-v7, gemma, gemma3, zephyr, "
        "phi3, deepseek); send a raw prompt instead of chat messages");
  }
  std::optional<std::string> default_system;
  if (*family == Family::kChatMl || *family == Family::kQwen25) {
    default_system = ChatMlDefaultSystem(jinja_source);
  } else if (*family == Family::kDeepSeek) {
    default_system = DeepSeekDefaultSystem(jinja_source);
  }
  if (*family == Family::kQwen25 && !default_system.has_value()) {
    // The bare family name: Qwen2.5's own text.
    default_system =
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  }
  ChatTemplate t(*family, std::move(default_system), std::move(bos_text),
                 std::move(eos_text));
  if (*family == Family::kGemma3) {
    t.system_separator_ = Gemma3SystemSeparator(jinja_source);
  }
  return t;
}

std::string_view ChatTemplate::name() const {
  for (const FamilyName& f : kFamilyNames) {
    if (f.family == family_) return f.name;
  }
  return "unknown";
}

absl::StatusOr<std::string> ChatTemplate::Render(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt,
    absl::Span<const std::string> tools) const {
  if (!supports_tools()) {
    bool calls = false;
    for (const ChatMessage& m : messages) calls |= !m.tool_calls.empty();
    if (!tools.empty() || calls) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's chat template (", AsAbsl(name()),
          ") has no tool calls; braid renders tools with Qwen2.5's"));
    }
  }
  switch (family_) {
    case Family::kChatMl:
      return RenderChatMl(messages, add_generation_prompt);
    case Family::kQwen25:
      return RenderQwen25(messages, add_generation_prompt, tools);
    case Family::kLlama2:
      return RenderLlama2(messages, add_generation_prompt);
    case Family::kLlama3:
      return RenderLlama3(messages, add_generation_prompt);
    case Family::kMistralV1:
      return RenderMistralV1(messages, add_generation_prompt);
    case Family::kMistralV3:
      return RenderMistralV3(messages, add_generation_prompt);
    case Family::kMistralV7:
      return RenderMistralV7(messages, add_generation_prompt);
    case Family::kGemma:
    case Family::kGemma3:
      return RenderGemmaTurns(messages, add_generation_prompt);
    case Family::kZephyr:
      return RenderZephyr(messages, add_generation_prompt);
    case Family::kPhi3:
      return RenderPhi3(messages, add_generation_prompt);
    case Family::kDeepSeek:
      return RenderDeepSeek(messages, add_generation_prompt);
  }
  return absl::InternalError("unhandled chat template family");
}

absl::StatusOr<std::string> ChatTemplate::RenderContinuation(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt) const {
  // The conversation so far stands in as one exchange with marker texts; the
  // continuation is what follows the assistant's marker.
  static constexpr std::string_view kUser = "\x01braid-user\x01";
  static constexpr std::string_view kAssistant = "\x01braid-assistant\x01";
  std::vector<ChatMessage> whole = {{"user", std::string(kUser)},
                                    {"assistant", std::string(kAssistant)}};
  whole.insert(whole.end(), messages.begin(), messages.end());
  absl::StatusOr<std::string> full = Render(whole, add_generation_prompt);
  if (!full.ok()) return full.status();
  absl::StatusOr<std::string> before =
      Render(absl::MakeConstSpan(whole).subspan(0, 2),
             /*add_generation_prompt=*/false);
  if (!before.ok()) return before.status();
  const size_t end = full->find(kAssistant);
  if (end == std::string::npos ||
      full->compare(0, end + kAssistant.size(), *before, 0,
                    end + kAssistant.size()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", AsAbsl(name()),
        " template renders earlier turns differently once more follow, so "
        "a conversation in a session cannot be continued with it; send the "
        "turn as raw text"));
  }
  return full->substr(end + kAssistant.size());
}

absl::StatusOr<std::string> ChatTemplate::RenderChatMl(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant", "tool"}, name());
      !s.ok()) {
    return s;
  }
  std::string out;
  if (default_system_.has_value() && !messages.empty() &&
      messages[0].role != "system") {
    absl::StrAppend(&out, "<|im_start|>system\n", *default_system_,
                    "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content,
                    "<|im_end|>\n");
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen2.5 Instruct. The system turn always opens (the default text when
// the first message is not a system one), with the tools' signatures when
// there are tools; an assistant turn with calls writes its text (if any)
// and one <tool_call> block per call; consecutive tool messages share one
// user turn of <tool_response> blocks. Like upstream, a conversation must
// have a first message.
absl::StatusOr<std::string> ChatTemplate::RenderQwen25(
    absl::Span<const ChatMessage> messages, bool gen,
    absl::Span<const std::string> tools) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant", "tool"}, name());
      !s.ok()) {
    return s;
  }
  if (messages.empty()) return EmptyConversationError(name());
  const bool system = messages[0].role == "system";
  const std::string& first_system =
      system ? messages[0].content : *default_system_;
  std::string out;
  if (!tools.empty()) {
    absl::StrAppend(
        &out, "<|im_start|>system\n", first_system,
        "\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within "
        "<tools></tools> XML tags:\n<tools>");
    for (const std::string& tool : tools) absl::StrAppend(&out, "\n", tool);
    out +=
        "\n</tools>\n\nFor each function call, return a json object with "
        "function name and arguments within <tool_call></tool_call> XML "
        "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else {
    absl::StrAppend(&out, "<|im_start|>system\n", first_system, "<|im_end|>\n");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0) ||
        (m.role == "assistant" && m.tool_calls.empty())) {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content,
                      "<|im_end|>\n");
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) absl::StrAppend(&out, "\n", m.content);
      for (const ChatToolCall& call : m.tool_calls) {
        absl::StrAppend(&out, "\n<tool_call>\n{\"name\": \"", call.name,
                        "\", \"arguments\": ", call.arguments,
                        "}\n</tool_call>");
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      absl::StrAppend(&out, "\n<tool_response>\n", m.content,
                      "\n</tool_response>");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") {
        out += "<|im_end|>\n";
      }
    }  // The first message, a system one, is in the system turn.
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Official Llama-2-chat: a leading system message is folded into the first
// user turn; contents are stripped; add_generation_prompt has no effect.
absl::StatusOr<std::string> ChatTemplate::RenderLlama2(
    absl::Span<const ChatMessage> messages, bool /*gen*/) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  if (messages.empty()) return EmptyConversationError(name());
  std::optional<std::string> system;
  if (messages[0].role == "system") {
    system = messages[0].content;
    messages.remove_prefix(1);
  }
  if (absl::Status s = CheckAlternation(messages); !s.ok()) return s;
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == 0 && system.has_value()) {
      content = absl::StrCat("<<SYS>>\n", *system, "\n<</SYS>>\n\n", content);
    }
    if (messages[i].role == "user") {
      absl::StrAppend(&out, bos_, "[INST] ", PyStrip(content), " [/INST]");
    } else if (messages[i].role == "assistant") {
      absl::StrAppend(&out, " ", PyStrip(content), " ", eos_);
    }  // A system message at an odd position renders nothing, as upstream.
  }
  return out;
}

absl::StatusOr<std::string> ChatTemplate::RenderLlama3(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s = CheckRoles(
          messages, {"system", "user", "assistant", "ipython", "tool"}, name());
      !s.ok()) {
    return s;
  }
  std::string out = messages.empty() ? "" : bos_;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role,
                    "<|end_header_id|>\n\n", PyStrip(m.content), "<|eot_id|>");
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Mistral 7B v0.1/v0.2 and Mixtral 8x7B: alternating user/assistant turns
// only; add_generation_prompt has no effect.
absl::StatusOr<std::string> ChatTemplate::RenderMistralV1(
    absl::Span<const ChatMessage> messages, bool /*gen*/) const {
  if (absl::Status s = CheckRoles(messages, {"user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckAlternation(messages); !s.ok()) return s;
  std::string out = bos_;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      absl::StrAppend(&out, "[INST] ", m.content, " [/INST]");
    } else {
      absl::StrAppend(&out, m.content, eos_);
    }
  }
  return out;
}

// Mistral 7B v0.3 (without tools): a leading system message opens every
// user turn equal to the last one (the template compares the messages);
// add_generation_prompt has no effect.
absl::StatusOr<std::string> ChatTemplate::RenderMistralV3(
    absl::Span<const ChatMessage> messages, bool /*gen*/) const {
  if (messages.empty()) return EmptyConversationError(name());
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  std::optional<std::string> system;
  if (messages[0].role == "system") {
    system = messages[0].content;
    messages.remove_prefix(1);
  }
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      return absl::InvalidArgumentError(
          "the mistral-v3 template takes a system message only first");
    }
  }
  if (absl::Status s = CheckAlternation(messages); !s.ok()) return s;
  const ChatMessage* last_user = nullptr;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") last_user = &m;
  }
  std::string out = bos_;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      if (system.has_value() && m.content == last_user->content) {
        absl::StrAppend(&out, "[INST] ", *system, "\n\n", m.content, "[/INST]");
      } else {
        absl::StrAppend(&out, "[INST] ", m.content, "[/INST]");
      }
    } else {
      absl::StrAppend(&out, " ", PyStrip(m.content), eos_);
    }
  }
  return out;
}

absl::StatusOr<std::string> ChatTemplate::RenderMistralV7(
    absl::Span<const ChatMessage> messages, bool /*gen*/) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  std::string out = bos_;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      absl::StrAppend(&out, "[SYSTEM_PROMPT]", m.content, "[/SYSTEM_PROMPT]");
    } else if (m.role == "user") {
      absl::StrAppend(&out, "[INST]", m.content, "[/INST]");
    } else {
      absl::StrAppend(&out, m.content, eos_);
    }
  }
  return out;
}

// Gemma 1/2 refuse a system message; Gemma 3 puts a leading one, as it is,
// and system_separator_ before the first turn's text.
absl::StatusOr<std::string> ChatTemplate::RenderGemmaTurns(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  if (messages.empty()) return EmptyConversationError(name());
  std::string prefix;
  if (messages[0].role == "system") {
    if (!system_separator_.has_value()) {
      return absl::InvalidArgumentError(
          "the gemma template does not support a system role");
    }
    prefix = messages[0].content + *system_separator_;
    messages.remove_prefix(1);
  }
  if (absl::Status s = CheckAlternation(messages); !s.ok()) return s;
  std::string out = bos_;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    absl::StrAppend(
        &out, "<start_of_turn>", m.role == "assistant" ? "model" : m.role, "\n",
        i == 0 ? prefix : "", PyStrip(m.content), "<end_of_turn>\n");
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// Zephyr's generation prompt sits inside the message loop, so an empty
// conversation renders nothing at all.
absl::StatusOr<std::string> ChatTemplate::RenderZephyr(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  std::string out;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, eos_, "\n");
  }
  if (gen && !messages.empty()) out += "<|assistant|>\n";
  return out;
}

absl::StatusOr<std::string> ChatTemplate::RenderPhi3(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  std::string out;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|end|>\n");
  }
  out += gen ? "<|assistant|>\n" : eos_;
  return out;
}

absl::StatusOr<std::string> ChatTemplate::RenderDeepSeek(
    absl::Span<const ChatMessage> messages, bool gen) const {
  if (absl::Status s =
          CheckRoles(messages, {"system", "user", "assistant"}, name());
      !s.ok()) {
    return s;
  }
  bool has_system = false;
  for (const ChatMessage& m : messages) has_system |= m.role == "system";
  std::string out = bos_;
  if (!has_system && default_system_.has_value()) out += *default_system_;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      out += m.content;
    } else if (m.role == "user") {
      absl::StrAppend(&out, "### Instruction:\n", m.content, "\n");
    } else {
      absl::StrAppend(&out, "### Response:\n", m.content, "\n<|EOT|>\n");
    }
  }
  if (gen) out += "### Response:";
  return out;
}

}  // namespace braid::model
