#include "frontend/request_builder.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace braid::frontend {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// Length of the well-formed UTF-8 sequence at s[i], or 0 if ill-formed.
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = s[i + k];
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

absl::Status CheckUtf8(absl::string_view s, absl::string_view field) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      return Invalid(
          field,
          absl::StrCat("invalid UTF-8 at byte ", i, " (0x",
                       absl::Hex(static_cast<unsigned char>(s[i])), ")"));
    }
    i += n;
  }
  return absl::OkStatus();
}

bool Finite(float x) { return std::isfinite(x); }

}  // namespace

absl::StatusOr<absl::Duration> Objective(int64_t ms, int64_t max_ms,
                                         absl::string_view field,
                                         absl::string_view flag) {
  if (ms < 0 || ms > max_ms) {
    return Invalid(field, absl::StrCat("must be in [0, ", max_ms,
                                       "] (milliseconds; 0 = the daemon's --",
                                       flag, ")"));
  }
  return absl::Milliseconds(ms);
}

absl::StatusOr<absl::Duration> TpotObjective(int64_t ms,
                                             absl::string_view field) {
  return Objective(ms, 60000, field, "tpot_objective_ms");
}

absl::StatusOr<absl::Duration> TtftObjective(int64_t ms,
                                             absl::string_view field) {
  return Objective(ms, 3600000, field, "ttft_objective_ms");
}

bool IsValidUtf8(absl::string_view s) { return CheckUtf8(s, "").ok(); }

std::string SanitizeUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

RequestBuilder::RequestBuilder(const model::Tokenizer* tokenizer,
                               const model::ChatTemplate* chat_template,
                               Limits limits)
    : tokenizer_(tokenizer), chat_template_(chat_template), limits_(limits) {}

absl::Status RequestBuilder::CheckTokenIds(absl::Span<const int32_t> ids,
                                           absl::string_view field) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tokenizer_->vocab_size()) {
      return Invalid(field, absl::StrCat("token id ", ids[i], " at index ", i,
                                         " is outside the vocabulary [0, ",
                                         tokenizer_->vocab_size(), ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A chat prompt's messages, tool calls and tools, checked for UTF-8, as the
// chat template takes them.
absl::StatusOr<std::vector<model::ChatMessage>> ChatMessages(
    const PromptSpec& prompt) {
  std::vector<model::ChatMessage> messages;
  for (size_t i = 0; i < prompt.messages.size(); ++i) {
    const ChatMessageSpec& m = prompt.messages[i];
    const std::string field = absl::StrCat("prompt.chat.messages[", i, "]");
    BRAID_RETURN_IF_ERROR(CheckUtf8(m.content, field + ".content"));
    BRAID_RETURN_IF_ERROR(CheckUtf8(m.role, field + ".role"));
    model::ChatMessage message{m.role, m.content, {}};
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      const ToolCallSpec& c = m.tool_calls[j];
      const std::string call = absl::StrCat(field, ".tool_calls[", j, "]");
      BRAID_RETURN_IF_ERROR(CheckUtf8(c.name, call + ".name"));
      BRAID_RETURN_IF_ERROR(CheckUtf8(c.arguments, call + ".arguments"));
      message.tool_calls.push_back({c.name, c.arguments});
    }
    messages.push_back(std::move(message));
  }
  for (size_t j = 0; j < prompt.tools.size(); ++j) {
    BRAID_RETURN_IF_ERROR(
        CheckUtf8(prompt.tools[j], absl::StrCat("prompt.chat.tools[", j, "]")));
  }
  return messages;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> RequestBuilder::Tokenize(
    const PromptSpec& prompt, bool starts_context) const {
  std::string text;
  switch (prompt.kind) {
    case PromptSpec::Kind::kText:
      BRAID_RETURN_IF_ERROR(CheckUtf8(prompt.text, "prompt.text"));
      text = prompt.text;
      break;
    case PromptSpec::Kind::kChat: {
      if (chat_template_ == nullptr) {
        return Invalid("prompt.chat",
                       "this model's chat template is not recognised; send a "
                       "raw prompt in prompt.text rendered as the model "
                       "expects");
      }
      if (prompt.messages.empty()) {
        return Invalid("prompt.chat.messages", "must not be empty");
      }
      BRAID_ASSIGN_OR_RETURN(std::vector<model::ChatMessage> messages,
                             ChatMessages(prompt));
      if (!prompt.tools.empty() && !chat_template_->supports_tools()) {
        return Invalid(
            "prompt.chat.tools",
            absl::StrCat("this model's chat template (",
                         std::string(chat_template_->name()),
                         ") has no tool calls; braid renders tools with "
                         "Qwen2.5's (ChatML with <tool_call>)"));
      }
      if (prompt.continuation < 0 || prompt.continuation > 2) {
        return Invalid("prompt.chat.continuation",
                       absl::StrCat("unknown value ", prompt.continuation));
      }
      if (prompt.continuation != 0) {
        if (!prompt.tools.empty()) {
          return Invalid("prompt.chat.tools",
                         "are given with a whole conversation, not a "
                         "continuation");
        }
        return ChatContinuation(messages, prompt);
      }
      absl::StatusOr<std::string> rendered = chat_template_->Render(
          messages, prompt.add_generation_prompt, prompt.tools);
      if (!rendered.ok()) {
        return Invalid("prompt.chat", rendered.status().message());
      }
      text = *std::move(rendered);
      break;
    }
    case PromptSpec::Kind::kTokens:
      return Invalid("prompt", "token ids cannot be tokenized; send text");
    case PromptSpec::Kind::kNone:
      return Invalid("prompt", "one of text, tokens or chat must be set");
  }
  const bool add_special =
      prompt.add_special_tokens.has_value()
          ? *prompt.add_special_tokens
          : starts_context && prompt.kind == PromptSpec::Kind::kText;
  return tokenizer_->Encode(text, add_special, /*parse_special=*/true);
}

absl::StatusOr<std::vector<int32_t>> RequestBuilder::ChatContinuation(
    absl::Span<const model::ChatMessage> messages,
    const PromptSpec& prompt) const {
  absl::StatusOr<std::string> rendered = chat_template_->RenderContinuation(
      messages, prompt.add_generation_prompt);
  if (!rendered.ok()) {
    return Invalid("prompt.chat", rendered.status().message());
  }
  std::vector<int32_t> ids =
      tokenizer_->Encode(*rendered, /*add_special=*/false,
                         /*parse_special=*/true);
  // After a turn that ended with its end token, the context holds it.
  constexpr int kAfterEnd = 1;
  if (prompt.continuation == kAfterEnd && !ids.empty() &&
      tokenizer_->IsEndOfGeneration(ids.front())) {
    ids.erase(ids.begin());
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> RequestBuilder::PromptTokens(
    const PromptSpec& prompt, bool starts_context) const {
  std::vector<int32_t> ids;
  if (prompt.kind == PromptSpec::Kind::kTokens) {
    BRAID_RETURN_IF_ERROR(CheckTokenIds(prompt.tokens, "prompt.tokens.ids"));
    ids = prompt.tokens;
  } else {
    absl::StatusOr<std::vector<int32_t>> tokens =
        Tokenize(prompt, starts_context);
    if (!tokens.ok()) return tokens.status();
    ids = *std::move(tokens);
  }
  if (ids.empty()) return Invalid("prompt", "is empty (0 tokens)");
  if (static_cast<int64_t>(ids.size()) >= limits_.context_length) {
    return Invalid(
        "prompt",
        absl::StrCat("has ", ids.size(), " tokens but the context holds ",
                     limits_.context_length,
                     " (prompt plus at least one generated token)"));
  }
  return ids;
}

absl::Status RequestBuilder::FillSampling(
    const SamplingSpec& p, int prompt_tokens,
    batching::GenerationRequest* out) const {
  BRAID_RETURN_IF_ERROR(FillSamplerOptions(p, &out->sampling));
  BRAID_RETURN_IF_ERROR(FillStops(p, out));
  return FillLength(p, prompt_tokens, out);
}

absl::Status RequestBuilder::FillSamplerOptions(
    const SamplingSpec& p, batching::SamplingOptions* out) const {
  batching::SamplingOptions& s = *out;
  if (!Finite(p.temperature) || p.temperature < 0 || p.temperature > 100) {
    return Invalid("sampling.temperature",
                   absl::StrCat("must be a finite number in [0, 100], got ",
                                p.temperature));
  }
  s.temperature = p.temperature;
  if (p.top_k < 0) return Invalid("sampling.top_k", "must be >= 0");
  s.top_k = p.top_k;
  if (!Finite(p.top_p) || p.top_p < 0 || p.top_p > 1) {
    return Invalid("sampling.top_p", "must be in [0, 1] (0 means unset)");
  }
  s.top_p = p.top_p == 0 ? 1.0f : p.top_p;
  if (!Finite(p.min_p) || p.min_p < 0 || p.min_p > 1) {
    return Invalid("sampling.min_p", "must be in [0, 1]");
  }
  s.min_p = p.min_p;
  if (!Finite(p.repetition_penalty) || p.repetition_penalty < 0 ||
      p.repetition_penalty > 10) {
    return Invalid("sampling.repetition_penalty",
                   "must be in (0, 10] (0 means unset)");
  }
  s.repetition_penalty =
      p.repetition_penalty == 0 ? 1.0f : p.repetition_penalty;
  for (auto [value, name] :
       {std::pair{p.frequency_penalty, "sampling.frequency_penalty"},
        std::pair{p.presence_penalty, "sampling.presence_penalty"}}) {
    if (!Finite(value) || value < -2 || value > 2) {
      return Invalid(name, "must be in [-2, 2]");
    }
  }
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.seed = p.seed.has_value() ? *p.seed : std::random_device{}();
  if (p.top_logprobs < 0 || p.top_logprobs > limits_.max_top_logprobs) {
    return Invalid(
        "sampling.top_logprobs",
        absl::StrCat("must be in [0, ", limits_.max_top_logprobs, "]"));
  }
  if (p.top_logprobs > 0 && !p.logprobs) {
    return Invalid("sampling.top_logprobs", "requires sampling.logprobs");
  }
  s.logprobs = p.logprobs;
  s.top_logprobs = p.top_logprobs;
  return absl::OkStatus();
}

absl::Status RequestBuilder::FillStops(const SamplingSpec& p,
                                       batching::GenerationRequest* out) const {
  if (static_cast<int>(p.stop.size()) > limits_.max_stop_strings) {
    return Invalid(
        "sampling.stop",
        absl::StrCat("at most ", limits_.max_stop_strings, " stop strings"));
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    const std::string field = absl::StrCat("sampling.stop[", i, "]");
    const std::string& stop = p.stop[i];
    if (stop.empty() ||
        static_cast<int>(stop.size()) > limits_.max_stop_bytes) {
      return Invalid(
          field, absl::StrCat("must be 1..", limits_.max_stop_bytes, " bytes"));
    }
    BRAID_RETURN_IF_ERROR(CheckUtf8(stop, field));
    out->stop.push_back(stop);
  }
  BRAID_RETURN_IF_ERROR(
      CheckTokenIds(p.stop_token_ids, "sampling.stop_token_ids"));
  out->stop_token_ids = p.stop_token_ids;
  out->ignore_eos = p.ignore_eos;
  return absl::OkStatus();
}

absl::Status RequestBuilder::FillLength(
    const SamplingSpec& p, int prompt_tokens,
    batching::GenerationRequest* out) const {
  const int64_t room = limits_.context_length - prompt_tokens;
  if (p.max_tokens.has_value()) {
    if (*p.max_tokens < 1 || *p.max_tokens > room) {
      return Invalid(
          "sampling.max_tokens",
          absl::StrCat("must be in [1, ", room, "] (context ",
                       limits_.context_length, " minus ", prompt_tokens,
                       " prompt tokens), got ", *p.max_tokens));
    }
    out->max_tokens = static_cast<int>(*p.max_tokens);
  } else {
    out->max_tokens = room;
  }
  if (p.reasoning_budget < 0) {
    return Invalid("sampling.reasoning_budget", "must be >= 0");
  }
  out->reasoning.budget = p.reasoning_budget;
  out->reasoning.hide = p.hide_reasoning;
  return absl::OkStatus();
}

absl::StatusOr<batching::GenerationRequest> RequestBuilder::BuildGenerate(
    const GenerateSpec& request) const {
  batching::GenerationRequest out;
  out.arrival = absl::Now();
  if (request.request_id.size() > 128) {
    return Invalid("request_id", "must be at most 128 bytes");
  }
  BRAID_RETURN_IF_ERROR(CheckUtf8(request.request_id, "request_id"));
  out.request_id = request.request_id;
  if (request.tenant.size() > 64) {
    return Invalid("tenant", "must be at most 64 bytes");
  }
  out.tenant = request.tenant;
  if (request.priority < -100 || request.priority > 100) {
    return Invalid("priority", "must be in [-100, 100]");
  }
  out.priority = request.priority;
  BRAID_ASSIGN_OR_RETURN(
      out.tpot_objective,
      TpotObjective(request.tpot_objective_ms, "tpot_objective_ms"));
  BRAID_ASSIGN_OR_RETURN(
      out.ttft_objective,
      TtftObjective(request.ttft_objective_ms, "ttft_objective_ms"));
  if (!request.prompt.has_value()) return Invalid("prompt", "is required");
  absl::StatusOr<std::vector<int32_t>> prompt =
      PromptTokens(*request.prompt, /*starts_context=*/true);
  if (!prompt.ok()) return prompt.status();
  out.prompt = *std::move(prompt);
  BRAID_RETURN_IF_ERROR(FillSampling(
      request.sampling, static_cast<int>(out.prompt.size()), &out));
  return out;
}

}  // namespace braid::frontend
