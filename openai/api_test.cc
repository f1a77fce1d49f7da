// The OpenAI request bodies into specs: shapes, types and refusals, each
// error naming the JSON field; HTTP statuses and the error object.
#include "openai/api.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "openai/render.h"

namespace braid::openai {
namespace {

using ::testing::HasSubstr;
using Kind = frontend::PromptSpec::Kind;

absl::StatusOr<ApiRequest> Completion(absl::string_view body) {
  return ParseRequest(Endpoint::kCompletions, body);
}

absl::StatusOr<ApiRequest> Chat(absl::string_view body) {
  return ParseRequest(Endpoint::kChatCompletions, body);
}

// The message of a refused body; it starts with the field's name.
std::string Refusal(absl::StatusOr<ApiRequest> r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(ApiTest, CompletionPromptShapes) {
  auto text = Completion(R"({"model":"m","prompt":"hi"})");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->prompts.size(), 1u);
  EXPECT_EQ(text->prompts[0].kind, Kind::kText);
  EXPECT_EQ(text->prompts[0].text, "hi");
  EXPECT_EQ(text->sampling.max_tokens, 16);  // OpenAI's default
  EXPECT_EQ(text->n, 1);
  EXPECT_FALSE(text->stream);

  auto ids = Completion(R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->prompts.size(), 1u);
  EXPECT_EQ(ids->prompts[0].kind, Kind::kTokens);
  EXPECT_EQ(ids->prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));

  auto batch = Completion(R"({"prompt":["a",[5,6]]})");
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->prompts.size(), 2u);
  EXPECT_EQ(batch->prompts[0].kind, Kind::kText);
  EXPECT_EQ(batch->prompts[1].tokens, (std::vector<int32_t>{5, 6}));

  EXPECT_THAT(Refusal(Completion(R"({"model":"m"})")), HasSubstr("prompt:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":[]})")), HasSubstr("prompt:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":[1,"a"]})")),
              HasSubstr("prompt[1]:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":[-1]})")),
              HasSubstr("prompt[0]:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":{"a":1}})")),
              HasSubstr("prompt:"));
}

TEST(ApiTest, SamplingFields) {
  auto r = Completion(R"({"prompt":"x","max_tokens":7,"temperature":0.5,
      "top_p":0.9,"top_k":40,"min_p":0.05,"frequency_penalty":0.1,
      "presence_penalty":-0.2,"repetition_penalty":1.1,"seed":42,
      "stop":["\n","END"],"logprobs":3,"ignore_eos":true,"n":3,"user":"u1",
      "stream":true,"stream_options":{"include_usage":true},
      "cache_prompt":false,"some_extension":{"x":1},"tpot_objective_ms":25,
      "ttft_objective_ms":1500})");
  ASSERT_TRUE(r.ok()) << r.status();
  const frontend::SamplingSpec& s = r->sampling;
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, 0.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, -0.2f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(r->n, 3);
  EXPECT_EQ(r->user, "u1");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->tpot_objective_ms, 25);
  EXPECT_EQ(r->ttft_objective_ms, 1500);

  // null means unset; an integral float is an integer; top_k -1 is off.
  auto nulls = Completion(
      R"({"prompt":"x","temperature":null,"max_tokens":5.0,"top_k":-1,"stop":"s"})");
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_EQ(nulls->sampling.temperature, 0);
  EXPECT_EQ(nulls->sampling.max_tokens, 5);
  EXPECT_EQ(nulls->sampling.top_k, 0);
  EXPECT_EQ(nulls->sampling.stop, (std::vector<std::string>{"s"}));
}

TEST(ApiTest, WrongTypesNameTheField) {
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","temperature":"hot"})")),
              HasSubstr("temperature:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","max_tokens":1.5})")),
              HasSubstr("max_tokens:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","max_tokens":0})")),
              HasSubstr("max_tokens:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","max_tokens":-5})")),
              HasSubstr("max_tokens:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","n":0})")), HasSubstr("n:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","n":17})")), HasSubstr("n:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","stream":"yes"})")),
              HasSubstr("stream:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","stop":[1]})")),
              HasSubstr("stop[0]:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","logprobs":21})")),
              HasSubstr("logprobs:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","seed":"s"})")),
              HasSubstr("seed:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","model":5})")),
              HasSubstr("model:"));
  EXPECT_THAT(
      Refusal(Completion(R"({"prompt":"x","tpot_objective_ms":"fast"})")),
      HasSubstr("tpot_objective_ms:"));
  EXPECT_THAT(
      Refusal(Completion(R"({"prompt":"x","ttft_objective_ms":-1.5})")),
      HasSubstr("ttft_objective_ms:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","top_p":0})")),
              HasSubstr("top_p:"));
  EXPECT_THAT(Refusal(Completion(
                  R"({"prompt":"x","stream_options":{"include_usage":true}})")),
              HasSubstr("stream_options:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","temperature":1e400})")),
              HasSubstr("body:"));  // not JSON: numbers must be finite
}

TEST(ApiTest, BodiesThatAreNotJsonObjects) {
  EXPECT_THAT(Refusal(Completion("")), HasSubstr("body:"));
  EXPECT_THAT(Refusal(Completion("{")), HasSubstr("body:"));
  EXPECT_THAT(Refusal(Completion("[1]")), HasSubstr("body:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":NaN})")), HasSubstr("body:"));
  EXPECT_THAT(Refusal(Completion("{\"prompt\":\"\xff\xfe\"}")),
              HasSubstr("UTF-8"));
}

TEST(ApiTest, UnsupportedFieldsAreRefusedByName) {
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","logit_bias":{"5":1}})")),
              HasSubstr("logit_bias:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","echo":true})")),
              HasSubstr("echo:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","suffix":"y"})")),
              HasSubstr("suffix:"));
  EXPECT_THAT(Refusal(Completion(R"({"prompt":"x","best_of":3})")),
              HasSubstr("best_of:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":"x"}],
                      "tool_choice":"required"})")),
              HasSubstr("tool_choice:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":"x"}],
                      "response_format":{"type":"json_object"}})")),
              HasSubstr("response_format:"));
  // Empty or neutral values are fine.
  EXPECT_TRUE(
      Completion(R"({"prompt":"x","logit_bias":{},"echo":false})").ok());
}

// Tools reach the chat template as the client wrote them (keys in order,
// as Python's json.dumps writes them); a call's arguments, a JSON string in
// the API, as the object's text; "none" leaves the tools out.
TEST(ApiTest, ToolsAndToolCalls) {
  auto r = Chat(R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1",
        "type":"function","function":{"name":"get_weather",
        "arguments":"{\"city\":\"Paris\",\"days\":2}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"21 C"}],
    "tools":[{"type":"function","function":{"name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}},
      "description":"é"}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tools);
  const frontend::PromptSpec& p = r->prompts[0];
  ASSERT_EQ(p.tools.size(), 1u);
  EXPECT_EQ(p.tools[0],
            R"({"type": "function", "function": {"name": "get_weather", )"
            R"("parameters": {"type": "object", "properties": {"city": )"
            R"({"type": "string"}}}, "description": "é"}})");
  ASSERT_EQ(p.messages.size(), 3u);
  EXPECT_EQ(p.messages[1].content, "");
  ASSERT_EQ(p.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(p.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.messages[1].tool_calls[0].arguments,
            R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(p.messages[2].role, "tool");

  auto none = Chat(R"({"messages":[{"role":"user","content":"x"}],
      "tools":[{"type":"function","function":{"name":"f"}}],
      "tool_choice":"none"})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->tools);
  EXPECT_TRUE(none->prompts[0].tools.empty());

  for (
      const char* bad : {
          R"("tools":[{"type":"function"}])",
          R"("tools":[{"type":"retrieval","function":{"name":"f"}}])",
          R"("tools":[{"type":"function","function":{"name":""}}])",
          R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])",
          R"("tools":{"type":"function"})",
      }) {
    EXPECT_THAT(
        Refusal(Chat(absl::StrCat(
            R"({"messages":[{"role":"user","content":"x"}],)", bad, "}"))),
        HasSubstr("tools"))
        << bad;
  }
  EXPECT_THAT(Refusal(Completion(
                  R"({"prompt":"x","tools":[{"type":"function",
                      "function":{"name":"f"}}]})")),
              HasSubstr("tools: are only for chat"));
  for (
      const char* bad : {
          R"({"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"not json"}}]})",
          R"({"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]})",
          R"({"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]})",
          R"({"role":"assistant","tool_calls":{}})",
          R"({"role":"user","content":"x","tool_calls":[{"function":{"name":"f"}}]})",
      }) {
    EXPECT_THAT(Refusal(Chat(absl::StrCat(R"({"messages":[)", bad, "]}"))),
                HasSubstr("messages[0].tool_calls"))
        << bad;
  }
}

TEST(ApiTest, ChatMessages) {
  auto r = Chat(R"({"messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},
                                {"type":"text","text":"b"}]}],
      "max_completion_tokens":9,"max_tokens":3,"logprobs":true,
      "top_logprobs":2})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompts.size(), 1u);
  const frontend::PromptSpec& p = r->prompts[0];
  EXPECT_EQ(p.kind, Kind::kChat);
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0].role, "system");
  EXPECT_EQ(p.messages[1].content, "a\nb");
  EXPECT_EQ(r->sampling.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 2);

  auto unset = Chat(R"({"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->sampling.max_tokens.has_value());  // the context's

  EXPECT_THAT(Refusal(Chat(R"({"messages":[]})")), HasSubstr("messages:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"content":"x"}]})")),
              HasSubstr("messages[0].role:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":5}]})")),
              HasSubstr("messages[0].content:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":
                      [{"type":"image_url","image_url":{"url":"x"}}]}]})")),
              HasSubstr("messages[0].content[0].type:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":"x"}],
                      "top_logprobs":2})")),
              HasSubstr("top_logprobs:"));
}

TEST(ApiTest, BuilderErrorsNameJsonFields) {
  EXPECT_EQ(
      ToApiFields(absl::InvalidArgumentError("sampling.top_p: bad")).message(),
      "top_p: bad");
  EXPECT_EQ(ToApiFields(absl::InvalidArgumentError(
                            "prompt.chat.messages[1].content: bad"))
                .message(),
            "messages[1].content: bad");
  EXPECT_EQ(ToApiFields(absl::InvalidArgumentError("tenant: long")).message(),
            "user: long");
  EXPECT_EQ(ToApiFields(absl::InvalidArgumentError("prompt: empty")).message(),
            "prompt: empty");
}

TEST(RenderTest, StatusesAndErrorObject) {
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusOf(absl::PermissionDeniedError("x")), 403);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusOf(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("x")), 500);
  const std::string body =
      ErrorBody(absl::InvalidArgumentError("top_p: must be in (0, 1]"));
  EXPECT_THAT(body, HasSubstr(R"("param":"top_p")"));
  EXPECT_THAT(body, HasSubstr(R"("type":"invalid_request_error")"));
  EXPECT_THAT(body, HasSubstr(R"("message":"top_p: must be in (0, 1]")"));
}

// With tools, a choice's <tool_call> blocks come back as tool_calls, whole
// (content null when there is none besides) and streamed (no part of a call
// in any content delta, each call in a delta of its own), finishing
// "tool_calls"; without tools the same text is content.
TEST(RenderTest, ToolCallsWholeAndStreamed) {
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  ResponseMeta meta;
  meta.endpoint = Endpoint::kChatCompletions;
  meta.id = "chatcmpl-1";
  meta.tools = true;
  ChoiceEvent end;
  end.final = true;
  end.finish_reason = batching::FinishReason::kEos;
  end.output_tokens = 9;

  ResponseCollector whole(meta, 1);
  ChoiceEvent e;
  e.text = text;
  whole.Add(e);
  whole.Add(end);
  const nlohmann::json body = nlohmann::json::parse(whole.Body(5));
  const nlohmann::json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const nlohmann::json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_chatcmpl-1_0_0");
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\": \"Paris\"}");

  StreamRenderer stream(meta, 1);
  std::string sse;
  for (char c : "Sure. " + text) {
    ChoiceEvent piece;
    piece.text = std::string(1, c);
    piece.token_ids = {1};
    stream.Add(piece, &sse);
  }
  stream.Add(end, &sse);
  std::string content;
  std::vector<nlohmann::json> calls;
  std::string finish;
  for (absl::string_view line : absl::StrSplit(sse, "\n\n")) {
    if (!absl::ConsumePrefix(&line, "data: ")) continue;
    const nlohmann::json chunk = nlohmann::json::parse(line);
    const nlohmann::json& c = chunk["choices"][0];
    const nlohmann::json& delta = c["delta"];
    if (delta.contains("content")) {
      EXPECT_EQ(delta["content"].get<std::string>().find("tool"),
                std::string::npos);
      content += delta["content"].get<std::string>();
    }
    if (delta.contains("tool_calls")) calls.push_back(delta["tool_calls"][0]);
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Sure. ");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(finish, "tool_calls");

  meta.tools = false;
  ResponseCollector plain(meta, 1);
  plain.Add(e);
  plain.Add(end);
  const nlohmann::json p = nlohmann::json::parse(plain.Body(5));
  EXPECT_EQ(p["choices"][0]["message"]["content"], text);
  EXPECT_EQ(p["choices"][0]["finish_reason"], "stop");
}

}  // namespace
}  // namespace braid::openai
