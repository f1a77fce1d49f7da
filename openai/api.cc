#include "openai/api.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/request_builder.h"
#include "nlohmann/json.hpp"
#include "openai/tools.h"
#include "util/status_macros.h"

namespace braid::openai {
namespace {

// Ordered: tools reach the chat template with their keys as sent.
using Json = nlohmann::ordered_json;

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The field's value, or null when absent (null and absent both mean unset).
const Json& Field(const Json& body, const char* name) {
  static const Json kNull;
  auto it = body.find(name);
  return it == body.end() ? kNull : *it;
}

absl::StatusOr<std::optional<double>> Number(const Json& body,
                                             const char* name) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return Invalid(name, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) return Invalid(name, "must be finite");
  return d;
}

// Integers; a float with an integral value (16.0) counts as one.
absl::StatusOr<std::optional<int64_t>> Integer(const Json& v,
                                               absl::string_view name) {
  if (v.is_null()) return std::nullopt;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Invalid(name, "is too large");
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return Invalid(name, "must be an integer");
}

// The integer field `name` of `body`.
absl::StatusOr<std::optional<int64_t>> IntegerField(const Json& body,
                                                    const char* name) {
  return Integer(Field(body, name), name);
}

absl::StatusOr<std::optional<bool>> Bool(const Json& body, const char* name) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return Invalid(name, "must be true or false");
  return v.get<bool>();
}

absl::StatusOr<std::optional<std::string>> String(const Json& body,
                                                  const char* name) {
  const Json& v = Field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) return Invalid(name, "must be a string");
  return v.get<std::string>();
}

// An int32 field in [lo, hi].
absl::StatusOr<std::optional<int32_t>> Int32(const Json& body, const char* name,
                                             int64_t lo, int64_t hi) {
  BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> v, IntegerField(body, name));
  if (!v.has_value()) return std::nullopt;
  if (*v < lo || *v > hi) {
    return Invalid(name,
                   absl::StrCat("must be in [", lo, ", ", hi, "], got ", *v));
  }
  return static_cast<int32_t>(*v);
}

// "stop": a string or an array of strings.
absl::Status ParseStop(const Json& body, frontend::SamplingSpec* s) {
  const Json& v = Field(body, "stop");
  if (v.is_null()) return absl::OkStatus();
  if (v.is_string()) {
    s->stop.push_back(v.get<std::string>());
    return absl::OkStatus();
  }
  if (!v.is_array()) return Invalid("stop", "must be a string or an array");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return Invalid(absl::StrCat("stop[", i, "]"), "must be a string");
    }
    s->stop.push_back(v[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TokenIds(const Json& v,
                                              absl::string_view field) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = absl::StrCat(field, "[", i, "]");
    BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> id, Integer(v[i], name));
    if (!id.has_value()) return Invalid(name, "must be a token id");
    if (*id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return Invalid(name, "must be a token id (>= 0)");
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

frontend::PromptSpec TextPrompt(std::string text) {
  frontend::PromptSpec p;
  p.kind = frontend::PromptSpec::Kind::kText;
  p.text = std::move(text);
  return p;
}

frontend::PromptSpec TokenPrompt(std::vector<int32_t> ids) {
  frontend::PromptSpec p;
  p.kind = frontend::PromptSpec::Kind::kTokens;
  p.tokens = std::move(ids);
  return p;
}

// "prompt": a string, an array of strings, an array of token ids, or an
// array of token-id arrays.
absl::Status ParsePrompt(const Json& body, ApiRequest* out) {
  const Json& v = Field(body, "prompt");
  if (v.is_null()) return Invalid("prompt", "is required");
  if (v.is_string()) {
    out->prompts.push_back(TextPrompt(v.get<std::string>()));
    return absl::OkStatus();
  }
  if (!v.is_array() || v.empty()) {
    return Invalid("prompt",
                   "must be a string, an array of strings, an array of token "
                   "ids or an array of token-id arrays");
  }
  if (v[0].is_number()) {
    BRAID_ASSIGN_OR_RETURN(std::vector<int32_t> ids, TokenIds(v, "prompt"));
    out->prompts.push_back(TokenPrompt(std::move(ids)));
    return absl::OkStatus();
  }
  if (v.size() > kMaxPrompts) {
    return Invalid("prompt", absl::StrCat("at most ", kMaxPrompts,
                                          " prompts in one request"));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("prompt[", i, "]");
    if (v[i].is_string()) {
      out->prompts.push_back(TextPrompt(v[i].get<std::string>()));
    } else if (v[i].is_array()) {
      BRAID_ASSIGN_OR_RETURN(std::vector<int32_t> ids, TokenIds(v[i], field));
      out->prompts.push_back(TokenPrompt(std::move(ids)));
    } else {
      return Invalid(field, "must be a string or an array of token ids");
    }
  }
  return absl::OkStatus();
}

// A message's "content": a string, or an array of text parts (joined by
// newlines, as vLLM does).
absl::StatusOr<std::string> Content(const Json& v, absl::string_view field) {
  if (v.is_null()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return Invalid(field, "must be a string or an array");
  std::vector<std::string> texts;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = absl::StrCat(field, "[", i, "]");
    if (!v[i].is_object()) return Invalid(part, "must be an object");
    const Json& type = Field(v[i], "type");
    if (!type.is_string() || type.get<std::string>() != "text") {
      return Invalid(absl::StrCat(part, ".type"),
                     "only \"text\" parts are supported (this model reads "
                     "text only)");
    }
    const Json& text = Field(v[i], "text");
    if (!text.is_string()) {
      return Invalid(absl::StrCat(part, ".text"), "must be a string");
    }
    texts.push_back(text.get<std::string>());
  }
  return absl::StrJoin(texts, "\n");
}

// `v` (`field`) as {type: "function", function: {name, ...}}, the name a
// non-empty string (the type may be left out of a call): its function.
absl::StatusOr<const Json*> FunctionOf(const Json& v, const std::string& field,
                                       bool type_optional) {
  if (!v.is_object()) return Invalid(field, "must be an object");
  const Json& type = Field(v, "type");
  if (!(type.is_null() && type_optional) &&
      !(type.is_string() && type.get<std::string>() == "function")) {
    return Invalid(field + ".type", "must be \"function\"");
  }
  const Json& function = Field(v, "function");
  if (!function.is_object()) {
    return Invalid(field + ".function", "must be an object");
  }
  const Json& name = Field(function, "name");
  if (!name.is_string() || name.get<std::string>().empty()) {
    return Invalid(field + ".function.name", "must be a non-empty string");
  }
  return &function;
}

// An assistant message's "tool_calls": [{type: "function", function:
// {name, arguments}}], the arguments a JSON object (as a string, the API's
// form, or as the object).
absl::StatusOr<std::vector<frontend::ToolCallSpec>> ToolCalls(
    const Json& message, const std::string& field) {
  std::vector<frontend::ToolCallSpec> calls;
  const Json& v = Field(message, "tool_calls");
  if (v.is_null()) return calls;
  if (!v.is_array()) return Invalid(field + ".tool_calls", "must be an array");
  for (size_t j = 0; j < v.size(); ++j) {
    const std::string call = absl::StrCat(field, ".tool_calls[", j, "]");
    BRAID_ASSIGN_OR_RETURN(const Json* f,
                           FunctionOf(v[j], call, /*type_optional=*/true));
    const Json& function = *f;
    const Json& name = Field(function, "name");
    const Json& args = Field(function, "arguments");
    Json object = args;
    if (args.is_string()) {
      object = Json::parse(args.get<std::string>(), nullptr,
                           /*allow_exceptions=*/false);
    }
    if (args.is_null()) object = Json::object();
    if (!object.is_object()) {
      return Invalid(call + ".function.arguments",
                     "must be a JSON object (or its text)");
    }
    calls.push_back({name.get<std::string>(), PyJson(object)});
  }
  return calls;
}

absl::Status ParseMessages(const Json& body, ApiRequest* out) {
  const Json& v = Field(body, "messages");
  if (!v.is_array() || v.empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  frontend::PromptSpec p;
  p.kind = frontend::PromptSpec::Kind::kChat;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!v[i].is_object()) return Invalid(field, "must be an object");
    const Json& role = Field(v[i], "role");
    if (!role.is_string()) {
      return Invalid(field + ".role", "must be a string");
    }
    frontend::ChatMessageSpec m;
    m.role = role.get<std::string>();
    // OpenAI's newer name for the system role.
    if (m.role == "developer") m.role = "system";
    BRAID_ASSIGN_OR_RETURN(m.content,
                           Content(Field(v[i], "content"), field + ".content"));
    BRAID_ASSIGN_OR_RETURN(m.tool_calls, ToolCalls(v[i], field));
    if (!m.tool_calls.empty() && m.role != "assistant") {
      return Invalid(field + ".tool_calls",
                     "only assistant messages call tools");
    }
    p.messages.push_back(std::move(m));
  }
  out->prompts.push_back(std::move(p));
  return absl::OkStatus();
}

// "tools" (chat): [{type: "function", function: {name, description?,
// parameters?}}], each passed to the chat template as the client wrote it;
// "tool_choice": "auto" (the default: the model may call them) or "none"
// (they are left out). Forcing a call ("required", a named function) would
// need output constrained to the call's form, which braid does not do.
absl::Status ParseTools(const Json& body, ApiRequest* out) {
  const Json& v = Field(body, "tools");
  const Json& choice = Field(body, "tool_choice");
  if (!choice.is_null() &&
      !(choice.is_string() && (choice.get<std::string>() == "auto" ||
                               choice.get<std::string>() == "none"))) {
    return Invalid("tool_choice",
                   "only \"auto\" and \"none\" are supported (braid does not "
                   "constrain the output to a call)");
  }
  if (v.is_null() || (v.is_array() && v.empty())) return absl::OkStatus();
  if (out->endpoint != Endpoint::kChatCompletions) {
    return Invalid("tools", "are only for chat completions");
  }
  if (!v.is_array()) return Invalid("tools", "must be an array");
  std::vector<std::string> tools;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("tools[", i, "]");
    BRAID_ASSIGN_OR_RETURN(const Json* f,
                           FunctionOf(v[i], field, /*type_optional=*/false));
    const Json& function = *f;
    const Json& description = Field(function, "description");
    if (!description.is_null() && !description.is_string()) {
      return Invalid(field + ".function.description", "must be a string");
    }
    const Json& parameters = Field(function, "parameters");
    if (!parameters.is_null() && !parameters.is_object()) {
      return Invalid(field + ".function.parameters", "must be an object");
    }
    tools.push_back(PyJson(v[i]));
  }
  if (choice.is_string() && choice.get<std::string>() == "none") {
    return absl::OkStatus();
  }
  out->prompts[0].tools = std::move(tools);
  out->tools = true;
  return absl::OkStatus();
}

// Fields of the API that braid does not implement: refused by name rather
// than silently ignored, since a client relying on them would get wrong
// output.
absl::Status RefuseUnsupported(const Json& body, Endpoint endpoint) {
  const Json& bias = Field(body, "logit_bias");
  if (!bias.is_null() && !(bias.is_object() && bias.empty())) {
    return Invalid("logit_bias", "is not supported");
  }
  if (!Field(body, "suffix").is_null()) {
    return Invalid("suffix", "is not supported");
  }
  BRAID_ASSIGN_OR_RETURN(std::optional<bool> echo, Bool(body, "echo"));
  if (echo.value_or(false)) return Invalid("echo", "is not supported");
  const Json& format = Field(body, "response_format");
  if (!format.is_null()) {
    const Json& type = format.is_object() ? Field(format, "type") : format;
    if (!type.is_string() || type.get<std::string>() != "text") {
      return Invalid("response_format",
                     "only {\"type\": \"text\"} is supported");
    }
  }
  if (endpoint == Endpoint::kCompletions) {
    BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> best_of,
                           IntegerField(body, "best_of"));
    BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> n, IntegerField(body, "n"));
    if (best_of.has_value() && *best_of != n.value_or(1)) {
      return Invalid("best_of", "is not supported (other than equal to n)");
    }
  }
  return absl::OkStatus();
}

// temperature .. seed, the penalties, braid's and vLLM's extensions.
absl::Status ParseSampling(const Json& body, frontend::SamplingSpec* s) {
  struct FloatField {
    const char* name;
    float* out;
  };
  for (const FloatField& f : {FloatField{"temperature", &s->temperature},
                              {"top_p", &s->top_p},
                              {"min_p", &s->min_p},
                              {"frequency_penalty", &s->frequency_penalty},
                              {"presence_penalty", &s->presence_penalty},
                              {"repetition_penalty", &s->repetition_penalty}}) {
    BRAID_ASSIGN_OR_RETURN(std::optional<double> v, Number(body, f.name));
    if (!v.has_value()) continue;
    if (std::fabs(*v) > 1e6) return Invalid(f.name, "is out of range");
    *f.out = static_cast<float>(*v);
  }
  // OpenAI's top_p = 1 is RequestBuilder's default; 0 there means unset.
  if (s->top_p == 0 && !Field(body, "top_p").is_null()) {
    return Invalid("top_p", "must be in (0, 1]");
  }
  if (s->repetition_penalty == 0 &&
      !Field(body, "repetition_penalty").is_null()) {
    return Invalid("repetition_penalty", "must be in (0, 10]");
  }
  // top_k: -1 is vLLM's "off".
  BRAID_ASSIGN_OR_RETURN(std::optional<int32_t> top_k,
                         Int32(body, "top_k", -1, 1 << 30));
  if (top_k.has_value()) s->top_k = *top_k < 0 ? 0 : *top_k;
  const Json& seed = Field(body, "seed");
  if (!seed.is_null()) {
    if (seed.is_number_unsigned()) {
      s->seed = seed.get<uint64_t>();
    } else {
      BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> v, Integer(seed, "seed"));
      s->seed = static_cast<uint64_t>(v.value_or(0));
    }
  }
  BRAID_RETURN_IF_ERROR(ParseStop(body, s));
  const Json& stop_ids = Field(body, "stop_token_ids");
  if (!stop_ids.is_null()) {
    if (!stop_ids.is_array()) {
      return Invalid("stop_token_ids", "must be an array of token ids");
    }
    BRAID_ASSIGN_OR_RETURN(s->stop_token_ids,
                           TokenIds(stop_ids, "stop_token_ids"));
  }
  BRAID_ASSIGN_OR_RETURN(std::optional<bool> ignore_eos,
                         Bool(body, "ignore_eos"));
  s->ignore_eos = ignore_eos.value_or(false);
  // llama.cpp's name: reasoning tokens before the end marker is forced.
  BRAID_ASSIGN_OR_RETURN(std::optional<int32_t> budget,
                         Int32(body, "reasoning_budget", -1, 1 << 30));
  if (budget.has_value() && *budget > 0) s->reasoning_budget = *budget;
  return absl::OkStatus();
}

// max_tokens (chat: also max_completion_tokens, which wins).
absl::Status ParseMaxTokens(const Json& body, Endpoint endpoint,
                            frontend::SamplingSpec* s) {
  BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens,
                         IntegerField(body, "max_tokens"));
  const char* name = "max_tokens";
  if (endpoint == Endpoint::kChatCompletions) {
    BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> completion,
                           IntegerField(body, "max_completion_tokens"));
    if (completion.has_value()) {
      max_tokens = completion;
      name = "max_completion_tokens";
    }
  } else if (!max_tokens.has_value()) {
    max_tokens = 16;  // OpenAI's default for completions
  }
  if (max_tokens.has_value() && *max_tokens < 1) {
    return Invalid(name, absl::StrCat("must be >= 1, got ", *max_tokens));
  }
  s->max_tokens = max_tokens;
  return absl::OkStatus();
}

// logprobs: completions take a count of alternatives (0 = only the sampled
// token's); chat takes a flag and top_logprobs.
absl::Status ParseLogprobs(const Json& body, Endpoint endpoint,
                           frontend::SamplingSpec* s) {
  if (endpoint == Endpoint::kCompletions) {
    BRAID_ASSIGN_OR_RETURN(std::optional<int32_t> n,
                           Int32(body, "logprobs", 0, 20));
    if (n.has_value()) {
      s->logprobs = true;
      s->top_logprobs = *n;
    }
    return absl::OkStatus();
  }
  BRAID_ASSIGN_OR_RETURN(std::optional<bool> on, Bool(body, "logprobs"));
  BRAID_ASSIGN_OR_RETURN(std::optional<int32_t> top,
                         Int32(body, "top_logprobs", 0, 20));
  s->logprobs = on.value_or(false);
  if (top.has_value() && *top > 0 && !s->logprobs) {
    return Invalid("top_logprobs", "requires logprobs: true");
  }
  s->top_logprobs = top.value_or(0);
  return absl::OkStatus();
}

absl::Status ParseStreamOptions(const Json& body, ApiRequest* out) {
  BRAID_ASSIGN_OR_RETURN(std::optional<bool> stream, Bool(body, "stream"));
  out->stream = stream.value_or(false);
  const Json& opts = Field(body, "stream_options");
  if (opts.is_null()) return absl::OkStatus();
  if (!opts.is_object()) return Invalid("stream_options", "must be an object");
  if (!out->stream) {
    return Invalid("stream_options", "is only allowed with stream: true");
  }
  BRAID_ASSIGN_OR_RETURN(std::optional<bool> usage,
                         Bool(opts, "include_usage"));
  out->include_usage = usage.value_or(false);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ApiRequest> ParseRequest(Endpoint endpoint,
                                        absl::string_view body) {
  if (!frontend::IsValidUtf8(body)) {
    return Invalid("body", "is not valid UTF-8");
  }
  const Json json = Json::parse(body, /*cb=*/nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return Invalid("body", "is not valid JSON");
  }
  if (!json.is_object()) return Invalid("body", "must be a JSON object");
  ApiRequest out;
  out.endpoint = endpoint;
  BRAID_RETURN_IF_ERROR(RefuseUnsupported(json, endpoint));
  BRAID_ASSIGN_OR_RETURN(std::optional<std::string> model,
                         String(json, "model"));
  out.model = model.value_or("");
  BRAID_ASSIGN_OR_RETURN(std::optional<std::string> user, String(json, "user"));
  out.user = user.value_or("");
  BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> tpot,
                         IntegerField(json, "tpot_objective_ms"));
  out.tpot_objective_ms = tpot.value_or(0);
  BRAID_ASSIGN_OR_RETURN(std::optional<int64_t> ttft,
                         IntegerField(json, "ttft_objective_ms"));
  out.ttft_objective_ms = ttft.value_or(0);
  if (endpoint == Endpoint::kCompletions) {
    BRAID_RETURN_IF_ERROR(ParsePrompt(json, &out));
  } else {
    BRAID_RETURN_IF_ERROR(ParseMessages(json, &out));
  }
  BRAID_RETURN_IF_ERROR(ParseTools(json, &out));
  BRAID_RETURN_IF_ERROR(ParseSampling(json, &out.sampling));
  BRAID_RETURN_IF_ERROR(ParseMaxTokens(json, endpoint, &out.sampling));
  BRAID_RETURN_IF_ERROR(ParseLogprobs(json, endpoint, &out.sampling));
  BRAID_ASSIGN_OR_RETURN(std::optional<int32_t> n,
                         Int32(json, "n", 1, kMaxChoices));
  out.n = n.value_or(1);
  BRAID_RETURN_IF_ERROR(ParseStreamOptions(json, &out));
  return out;
}

absl::Status ToApiFields(const absl::Status& status) {
  if (status.ok()) return status;
  std::string message(status.message());
  struct Rename {
    absl::string_view from, to;
  };
  // Longest first: each message names one field, at its start.
  for (const Rename& r : {Rename{"prompt.chat.messages", "messages"},
                          {"prompt.chat.tools", "tools"},
                          {"prompt.chat", "messages"},
                          {"prompt.tokens.ids", "prompt"},
                          {"prompt.text", "prompt"},
                          {"sampling.max_tokens", "max_tokens"},
                          {"sampling.", ""},
                          {"tenant", "user"}}) {
    if (absl::StartsWith(message, r.from)) {
      message = absl::StrCat(r.to, message.substr(r.from.size()));
      break;
    }
  }
  return absl::Status(status.code(), message);
}

}  // namespace braid::openai
