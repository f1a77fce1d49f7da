// The builder with no transport: specs built by hand, as a front end other
// than gRPC builds them (the gRPC mapping's own cases are
// //server:request_builder_test).
#include "frontend/request_builder.h"

#include "gtest/gtest.h"
#include "model/testing/smollm2.h"

namespace braid::frontend {
namespace {

TEST(FrontendRequestBuilderTest, SpecsBecomeEngineRequests) {
  auto loaded = model::testing::LoadSmolLm2(/*with_weights=*/false);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const RequestBuilder builder(loaded->tokenizer.get(), nullptr,
                               {.context_length = 64});
  GenerateSpec spec;
  spec.tenant = "team-a";
  spec.prompt =
      PromptSpec{.kind = PromptSpec::Kind::kText, .text = "Hello world"};
  spec.sampling.temperature = 0.7f;
  spec.sampling.top_p = 0;  // unset: 1
  spec.sampling.max_tokens = 5;
  spec.sampling.stop = {"\n\n"};
  spec.sampling.seed = 42;
  auto built = builder.BuildGenerate(spec);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->prompt, (std::vector<int32_t>{19556, 905}));
  EXPECT_EQ(built->tenant, "team-a");
  EXPECT_FLOAT_EQ(built->sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(built->sampling.top_p, 1.0f);
  EXPECT_EQ(built->sampling.seed, 42u);
  EXPECT_EQ(built->max_tokens, 5);
  EXPECT_EQ(built->stop, std::vector<std::string>{"\n\n"});

  // Errors name the API's field.
  spec.sampling.max_tokens = 63;
  auto too_long = builder.BuildGenerate(spec);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("sampling.max_tokens"),
            std::string::npos);
  spec.sampling.max_tokens.reset();
  spec.prompt =
      PromptSpec{.kind = PromptSpec::Kind::kChat, .messages = {{"user", "hi"}}};
  auto chat = builder.BuildGenerate(spec);  // no recognised template
  EXPECT_NE(chat.status().message().find("prompt.chat"), std::string::npos);
  spec.prompt =
      PromptSpec{.kind = PromptSpec::Kind::kTokens, .tokens = {1, 99999999}};
  auto ids = builder.BuildGenerate(spec);
  EXPECT_NE(ids.status().message().find("prompt.tokens.ids"),
            std::string::npos);
  spec.prompt.reset();
  EXPECT_NE(builder.BuildGenerate(spec).status().message().find("prompt"),
            std::string::npos);
}

// A session's next chat turn: the template's rendering after the last
// reply, without the end token the reply ended with (it is in the context)
// unless the reply was cut short.
TEST(FrontendRequestBuilderTest, ChatContinuation) {
  auto loaded = model::testing::LoadSmolLm2(/*with_weights=*/false);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // ChatML, as SmolLM2's template without its default system message.
  auto chatml = model::ChatTemplate::FromSource(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
      "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
      "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "", "<|im_end|>");
  ASSERT_TRUE(chatml.ok()) << chatml.status();
  const RequestBuilder builder(loaded->tokenizer.get(), &*chatml,
                               {.context_length = 256});
  const model::Tokenizer& tok = *loaded->tokenizer;
  PromptSpec p{.kind = PromptSpec::Kind::kChat, .messages = {{"user", "Hi"}}};
  p.continuation = 2;  // after a cut turn
  auto cut = builder.Tokenize(p);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(tok.Decode(*cut),
            "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>"
            "assistant\n");
  p.continuation = 1;  // after the end token
  auto after_end = builder.Tokenize(p);
  ASSERT_TRUE(after_end.ok());
  EXPECT_EQ(std::vector<int32_t>(cut->begin() + 1, cut->end()), *after_end);
  EXPECT_TRUE(tok.IsEndOfGeneration(cut->front()));
  p.continuation = 3;
  EXPECT_NE(
      builder.Tokenize(p).status().message().find("prompt.chat.continuation"),
      std::string::npos);
}

}  // namespace
}  // namespace braid::frontend
