// The OpenAI request bodies into specs: shapes, types and refusals, each
// error naming the JSON field; HTTP statuses and the error object.
#include "openai/api.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
      "cache_prompt":false,"some_extension":{"x":1}})");
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
                      "tools":[{"type":"function"}]})")),
              HasSubstr("tools:"));
  EXPECT_THAT(Refusal(Chat(R"({"messages":[{"role":"user","content":"x"}],
                      "response_format":{"type":"json_object"}})")),
              HasSubstr("response_format:"));
  // Empty or neutral values are fine.
  EXPECT_TRUE(
      Completion(R"({"prompt":"x","logit_bias":{},"echo":false})").ok());
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

}  // namespace
}  // namespace braid::openai
