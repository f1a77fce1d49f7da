#include "frontend/request_builder.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "frontend/session_open.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/smollm2.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/testing/vocab_file.h"
#include "server/convert.h"

namespace braid::server {
namespace {

TEST(Utf8Test, ValidAndInvalid) {
  EXPECT_TRUE(frontend::IsValidUtf8("plain"));
  EXPECT_TRUE(
      frontend::IsValidUtf8("caf\xC3\xA9 \xE4\xB8\x96 \xF0\x9F\x91\x8B"));
  EXPECT_FALSE(frontend::IsValidUtf8("\xFF"));
  EXPECT_FALSE(frontend::IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(frontend::IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(frontend::IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(frontend::IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_EQ(frontend::SanitizeUtf8("a\xFF"
                                   "b\xE4\xB8"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

class RequestBuilderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = model::testing::LoadSmolLm2(/*with_weights=*/false);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->tokenizer.release();
  }

  frontend::RequestBuilder Builder() const {
    return frontend::RequestBuilder(tokenizer_, nullptr,
                                    {.context_length = 64});
  }

  static v1::GenerateRequest Text(const std::string& text) {
    v1::GenerateRequest r;
    r.mutable_prompt()->set_text(text);
    return r;
  }

  void ExpectInvalid(const v1::GenerateRequest& r, const std::string& field) {
    SCOPED_TRACE(field);
    auto built = Builder().BuildGenerate(FromProto(r));
    ASSERT_FALSE(built.ok());
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(built.status().message().find(field), std::string::npos)
        << built.status();
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
};

TEST_F(RequestBuilderTest, DefaultsFillTheContext) {
  auto built = Builder().BuildGenerate(FromProto(Text("Hello world")));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->prompt, tokenizer_->Encode("Hello world", false, true));
  EXPECT_EQ(built->max_tokens, 64 - static_cast<int64_t>(built->prompt.size()));
  EXPECT_EQ(built->sampling.temperature, 0.0f);
  EXPECT_EQ(built->sampling.top_p, 1.0f);
  EXPECT_EQ(built->sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(built->tpot_objective, absl::ZeroDuration());  // the daemon's
  v1::GenerateRequest r = Text("Hello world");
  r.set_tpot_objective_ms(25);
  built = Builder().BuildGenerate(FromProto(r));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->tpot_objective, absl::Milliseconds(25));
  EXPECT_EQ(built->ttft_objective, absl::ZeroDuration());  // the daemon's
  r.set_ttft_objective_ms(2500);
  built = Builder().BuildGenerate(FromProto(r));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->ttft_objective, absl::Milliseconds(2500));
}

TEST_F(RequestBuilderTest, RejectsEachBadField) {
  ExpectInvalid(Text(""), "prompt");
  ExpectInvalid(v1::GenerateRequest(), "prompt");
  ExpectInvalid(Text("bad \xFF utf8"), "UTF-8");
  v1::GenerateRequest r = Text("hi");
  r.mutable_sampling()->set_max_tokens(0);
  ExpectInvalid(r, "max_tokens");
  r.mutable_sampling()->set_max_tokens(int64_t{1} << 31);
  ExpectInvalid(r, "max_tokens");
  r = Text("hi");
  r.mutable_sampling()->set_temperature(std::nanf(""));
  ExpectInvalid(r, "temperature");
  r.mutable_sampling()->set_temperature(-1);
  ExpectInvalid(r, "temperature");
  r = Text("hi");
  r.mutable_sampling()->add_stop_token_ids(49152);
  ExpectInvalid(r, "stop_token_ids");
  r = Text("hi");
  r.mutable_sampling()->add_stop("");
  ExpectInvalid(r, "stop[0]");
  r = Text("hi");
  r.mutable_sampling()->set_top_logprobs(3);
  ExpectInvalid(r, "requires sampling.logprobs");
  r = Text("hi");
  r.set_priority(101);
  ExpectInvalid(r, "priority");
  r = Text("hi");
  r.set_tpot_objective_ms(60001);
  ExpectInvalid(r, "tpot_objective_ms: must be in [0, 60000]");
  r = Text("hi");
  r.set_ttft_objective_ms(3600001);
  ExpectInvalid(r, "ttft_objective_ms: must be in [0, 3600000]");
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += " x";  // 100 tokens > 64
  r = Text(long_text);
  ExpectInvalid(r, "context");
  r = v1::GenerateRequest();
  r.mutable_prompt()->mutable_chat()->add_messages()->set_content("hi");
  ExpectInvalid(r, "chat template is not recognised");
}

// A session's TPOT and TTFT objectives travel to the engine's options; out
// of range they are refused naming the field, and a resume may not set them.
TEST_F(RequestBuilderTest, SessionObjectives) {
  v1::SessionOpen open;
  open.mutable_prefix()->set_text("Hello");
  v1::StreamSpec* s = open.add_streams();
  s->set_stream_id("out");
  s->set_kind(v1::STREAM_KIND_OUTPUT);
  open.set_tpot_objective_ms(40);
  open.set_ttft_objective_ms(900);
  auto built = frontend::BuildSession(FromProto(open), Builder(),
                                      frontend::ModelStreams{});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->options.tpot_objective, absl::Milliseconds(40));
  EXPECT_EQ(built->options.ttft_objective, absl::Milliseconds(900));
  open.set_ttft_objective_ms(3600001);
  built = frontend::BuildSession(FromProto(open), Builder(),
                                 frontend::ModelStreams{});
  EXPECT_NE(built.status().message().find("open.ttft_objective_ms"),
            std::string::npos)
      << built.status();
  open.set_ttft_objective_ms(0);
  open.set_tpot_objective_ms(70000);
  built = frontend::BuildSession(FromProto(open), Builder(),
                                 frontend::ModelStreams{});
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(built.status().message().find("open.tpot_objective_ms"),
            std::string::npos)
      << built.status();
  v1::SessionOpen resume;
  resume.set_session_id("s");
  resume.set_resume(true);
  EXPECT_TRUE(frontend::CheckResume(FromProto(resume)).ok());
  resume.set_tpot_objective_ms(40);
  EXPECT_FALSE(frontend::CheckResume(FromProto(resume)).ok());
  resume.set_tpot_objective_ms(0);
  resume.set_ttft_objective_ms(900);
  EXPECT_FALSE(frontend::CheckResume(FromProto(resume)).ok());
}

TEST_F(RequestBuilderTest, TokenPromptsAreCheckedNotTokenized) {
  v1::GenerateRequest r;
  r.mutable_prompt()->mutable_tokens()->add_ids(1);
  r.mutable_prompt()->mutable_tokens()->add_ids(42);
  auto built = Builder().BuildGenerate(FromProto(r));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->prompt, (std::vector<int32_t>{1, 42}));
  r.mutable_prompt()->mutable_tokens()->add_ids(-1);
  ExpectInvalid(r, "prompt.tokens.ids");
}

// add_special_tokens unset: the model's BOS starts a raw text prompt that
// starts a context (llama.cpp's and vLLM's completions), not chat messages
// (their template writes it), not Tokenize or a session's appended input;
// set, it is followed as given.
TEST(RequestBuilderSpecialTokensTest, BosWhereAContextStarts) {
  auto file =
      model::GgufFile::Open(model::testing::TestDataPath("spm_vocab.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto data = model::TokenizerDataFromGguf(**file);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(data->add_bos);
  auto tok = model::Tokenizer::Create(*std::move(data));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const int bos = (*tok)->bos_id();
  const frontend::RequestBuilder builder(tok->get(), nullptr,
                                         {.context_length = 64});
  v1::GenerateRequest r;
  r.mutable_prompt()->set_text("hello world");
  auto generate = builder.BuildGenerate(FromProto(r));
  ASSERT_TRUE(generate.ok()) << generate.status();
  EXPECT_EQ(generate->prompt.front(), bos);
  auto tokenized = builder.Tokenize(FromProto(r.prompt()));
  ASSERT_TRUE(tokenized.ok()) << tokenized.status();
  EXPECT_NE(tokenized->front(), bos);
  EXPECT_EQ(generate->prompt.size(), tokenized->size() + 1);
  auto appended = builder.PromptTokens(FromProto(r.prompt()), false);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(*appended, *tokenized);
  r.mutable_prompt()->set_add_special_tokens(false);
  auto without = builder.BuildGenerate(FromProto(r));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->prompt, *tokenized);
  r.mutable_prompt()->set_add_special_tokens(true);
  auto with = builder.Tokenize(FromProto(r.prompt()));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(*with, generate->prompt);
}

}  // namespace
}  // namespace braid::server
