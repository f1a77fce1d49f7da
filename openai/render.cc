#include "openai/render.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "frontend/request_builder.h"
#include "nlohmann/json.hpp"

namespace braid::openai {
namespace {

using Json = nlohmann::json;

// A token's text for logprobs (bytes of a partial character shown as
// U+FFFD; chat logprobs also give the exact bytes).
std::string TokenText(const model::Tokenizer& tokenizer, int32_t id) {
  return frontend::SanitizeUtf8(tokenizer.TokenBytes(id));
}

Json TokenBytes(const model::Tokenizer& tokenizer, int32_t id) {
  Json bytes = Json::array();
  for (unsigned char c : tokenizer.TokenBytes(id)) bytes.push_back(int{c});
  return bytes;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}.
Json ChatLogprobs(const model::Tokenizer& tokenizer,
                  const std::vector<batching::SampledToken>& tokens) {
  Json content = Json::array();
  for (const batching::SampledToken& t : tokens) {
    Json top = Json::array();
    for (const batching::TokenChoice& c : t.top) {
      top.push_back({{"token", TokenText(tokenizer, c.token_id)},
                     {"logprob", c.logprob},
                     {"bytes", TokenBytes(tokenizer, c.token_id)}});
    }
    content.push_back({{"token", TokenText(tokenizer, t.token_id)},
                       {"logprob", t.logprob},
                       {"bytes", TokenBytes(tokenizer, t.token_id)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Completions: {tokens, token_logprobs, top_logprobs, text_offset}.
Json CompletionLogprobs(const model::Tokenizer& tokenizer,
                        const std::vector<batching::SampledToken>& tokens,
                        const std::vector<int64_t>& offsets) {
  Json texts = Json::array(), logprobs = Json::array(), tops = Json::array();
  for (const batching::SampledToken& t : tokens) {
    texts.push_back(TokenText(tokenizer, t.token_id));
    logprobs.push_back(t.logprob);
    Json top = Json::object();
    for (const batching::TokenChoice& c : t.top) {
      top[TokenText(tokenizer, c.token_id)] = c.logprob;
    }
    tops.push_back(std::move(top));
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", offsets}};
}

Json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"completion_tokens_details",
           {{"reasoning_tokens", u.reasoning_tokens}}}};
}

Json Envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model}};
}

std::string Event(const Json& json) {
  return absl::StrCat(
      "data: ", json.dump(-1, ' ', false, Json::error_handler_t::replace),
      "\n\n");
}

// Offsets of each token's text in the choice's text, which grows by the
// event's text; tokens whose bytes end mid-character share an offset.
void AppendOffsets(const model::Tokenizer& tokenizer,
                   const std::vector<batching::SampledToken>& tokens,
                   int64_t* text_bytes, std::vector<int64_t>* out) {
  for (const batching::SampledToken& t : tokens) {
    out->push_back(*text_bytes);
    *text_bytes +=
        static_cast<int64_t>(tokenizer.TokenBytes(t.token_id).size());
  }
}

// Tool call ids, unique within the response: the response's id, the
// choice and the call's number.
std::string CallIdPrefix(const ResponseMeta& meta, size_t choice) {
  return absl::StrCat("call_", meta.id, "_", choice, "_");
}

Json ToolCallJson(const ToolCall& c) {
  return {{"id", c.id},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

// A choice that called tools and ended by itself finishes "tool_calls".
const char* FinishName(batching::FinishReason reason, int num_calls) {
  const char* name = FinishReasonName(reason);
  return num_calls > 0 && std::string_view(name) == "stop" ? "tool_calls"
                                                           : name;
}

void CountUsage(const ChoiceEvent& e, Usage* u) {
  if (!e.final) return;
  u->completion_tokens += e.output_tokens;
  u->reasoning_tokens += e.reasoning_tokens;
}

}  // namespace

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

std::string ErrorBody(const absl::Status& status) {
  const int http = HttpStatusOf(status);
  const char* type = http == 401   ? "authentication_error"
                     : http == 403 ? "permission_error"
                     : http == 404 ? "not_found_error"
                     : http == 429 ? "rate_limit_error"
                     : http == 503 ? "service_unavailable"
                     : http < 500  ? "invalid_request_error"
                                   : "server_error";
  Json param = nullptr;
  const absl::string_view message = status.message();
  if (status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kOutOfRange) {
    const size_t colon = message.find(": ");
    if (colon != absl::string_view::npos) {
      param = std::string(message.substr(0, colon));
    }
  }
  Json body = {{"error",
                {{"message", std::string(message)},
                 {"type", type},
                 {"param", param},
                 {"code", absl::StatusCodeToString(status.code())}}}};
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

const char* FinishReasonName(batching::FinishReason reason) {
  switch (reason) {
    case batching::FinishReason::kLength:
    case batching::FinishReason::kContextFull:
      return "length";
    default:
      return "stop";
  }
}

StreamRenderer::StreamRenderer(ResponseMeta meta, int num_choices)
    : meta_(std::move(meta)),
      started_(num_choices, false),
      text_bytes_(num_choices, 0) {
  if (meta_.tools) {
    for (int i = 0; i < num_choices; ++i) {
      splitters_.emplace_back(CallIdPrefix(meta_, i));
    }
  }
}

void StreamRenderer::Add(const ChoiceEvent& e, std::string* out) {
  CountUsage(e, &usage_);
  if (!splitters_.empty()) {
    // The output's text goes through the choice's splitter, which keeps
    // tool calls out of the content; what it held is content at the end.
    ToolCallSplitter& splitter = splitters_[e.index];
    ChoiceEvent content = e;
    content.final = false;
    std::vector<ToolCall> calls;
    if (!e.reasoning) {
      ToolCallSplitter::Piece p = splitter.Push(e.text);
      content.text = std::move(p.content);
      calls = std::move(p.calls);
    }
    if (e.final) content.text += splitter.Finish().content;
    AddDelta(content, out);
    for (size_t j = 0; j < calls.size(); ++j) {
      Json call = ToolCallJson(calls[j]);
      call["index"] = splitter.num_calls() - calls.size() + j;
      Json choice = {{"index", e.index},
                     {"delta", {{"tool_calls", Json::array({call})}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
      Json chunk = Envelope(meta_, "chat.completion.chunk");
      chunk["choices"] = Json::array({std::move(choice)});
      out->append(Event(chunk));
    }
    if (e.final) AddFinish(e, splitter.num_calls(), out);
    return;
  }
  AddDelta(e, out);
  if (e.final) AddFinish(e, 0, out);
}

void StreamRenderer::AddDelta(const ChoiceEvent& e, std::string* out) {
  const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
  const bool has_content = !e.text.empty() || !e.token_ids.empty();
  if (has_content || (chat && !started_[e.index])) {
    Json choice = {{"index", e.index}};
    Json logprobs = nullptr;
    if (meta_.logprobs && !e.logprobs.empty()) {
      if (chat) {
        logprobs = ChatLogprobs(*meta_.tokenizer, e.logprobs);
      } else {
        std::vector<int64_t> offsets;
        AppendOffsets(*meta_.tokenizer, e.logprobs, &text_bytes_[e.index],
                      &offsets);
        logprobs = CompletionLogprobs(*meta_.tokenizer, e.logprobs, offsets);
      }
    }
    if (chat) {
      Json delta = Json::object();
      if (!started_[e.index]) delta["role"] = "assistant";
      if (has_content)
        delta[e.reasoning ? "reasoning_content" : "content"] = e.text;
      choice["delta"] = std::move(delta);
      started_[e.index] = true;
    } else {
      choice["text"] = e.text;
    }
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = nullptr;
    Json chunk =
        Envelope(meta_, chat ? "chat.completion.chunk" : "text_completion");
    chunk["choices"] = Json::array({std::move(choice)});
    out->append(Event(chunk));
  }
}

void StreamRenderer::AddFinish(const ChoiceEvent& e, int num_calls,
                               std::string* out) {
  const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
  Json last = {{"index", e.index},
               {"logprobs", nullptr},
               {"finish_reason", FinishName(e.finish_reason, num_calls)}};
  if (chat) {
    last["delta"] = Json::object();
  } else {
    last["text"] = "";
  }
  Json chunk =
      Envelope(meta_, chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = Json::array({std::move(last)});
  out->append(Event(chunk));
}

std::string StreamRenderer::UsageEvent(int prompt_tokens) const {
  const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
  Json chunk =
      Envelope(meta_, chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = Json::array();
  Usage u = usage_;
  u.prompt_tokens = prompt_tokens;
  chunk["usage"] = UsageJson(u);
  return Event(chunk);
}

std::string StreamRenderer::ErrorEvent(const absl::Status& status) {
  return absl::StrCat("data: ", ErrorBody(status), "\n\n");
}

ResponseCollector::ResponseCollector(ResponseMeta meta, int num_choices)
    : meta_(std::move(meta)), choices_(num_choices) {}

void ResponseCollector::Add(const ChoiceEvent& e) {
  Choice& c = choices_[e.index];
  if (meta_.logprobs) {
    if (meta_.endpoint == Endpoint::kCompletions) {
      int64_t bytes = static_cast<int64_t>(c.text.size());
      AppendOffsets(*meta_.tokenizer, e.logprobs, &bytes, &c.offsets);
    }
    c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  }
  (e.reasoning ? c.reasoning : c.text) += e.text;
  if (e.final) {
    c.finish = e.finish_reason;
    c.output_tokens = e.output_tokens;
    c.reasoning_tokens = e.reasoning_tokens;
  }
}

std::string ResponseCollector::Body(int prompt_tokens) const {
  const bool chat = meta_.endpoint == Endpoint::kChatCompletions;
  Json choices = Json::array();
  Usage usage;
  usage.prompt_tokens = prompt_tokens;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    usage.completion_tokens += c.output_tokens;
    usage.reasoning_tokens += c.reasoning_tokens;
    Json choice = {{"index", i}};
    Json logprobs = nullptr;
    if (meta_.logprobs) {
      logprobs =
          chat ? ChatLogprobs(*meta_.tokenizer, c.logprobs)
               : CompletionLogprobs(*meta_.tokenizer, c.logprobs, c.offsets);
    }
    int num_calls = 0;
    if (chat) {
      Json message = {{"role", "assistant"}, {"content", c.text}};
      if (meta_.tools) {
        ToolCallSplitter::Piece p =
            SplitToolCalls(c.text, CallIdPrefix(meta_, i));
        num_calls = static_cast<int>(p.calls.size());
        message["content"] = p.content;
        if (p.content.empty() && num_calls > 0) message["content"] = nullptr;
        if (num_calls > 0) {
          Json calls = Json::array();
          for (const ToolCall& call : p.calls) {
            calls.push_back(ToolCallJson(call));
          }
          message["tool_calls"] = std::move(calls);
        }
      }
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.reasoning + c.text;
    }
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = FinishName(c.finish, num_calls);
    choices.push_back(std::move(choice));
  }
  Json body = Envelope(meta_, chat ? "chat.completion" : "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = UsageJson(usage);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace braid::openai
