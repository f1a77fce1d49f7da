#include "model/tokenizer/gguf_loader.h"

#include <memory>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/gguf_writer.h"
#include "model/testing/model_path.h"
#include "model/tokenizer/testing/vocab_file.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::model {
namespace {

TEST(GgufLoaderTest, RealModelMatchesVocabDump) {
  ASSERT_FALSE(testing::SmolLm2Path().empty()) << testing::kNoModelMessage;
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::Open(testing::SmolLm2Path());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(**gguf);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<TokenizerData> dump =
      testing::ReadVocabFile(testing::TestDataPath("smollm2_vocab.txt"));
  ASSERT_TRUE(dump.ok()) << dump.status();

  EXPECT_EQ(data->model, "gpt2");
  EXPECT_EQ(data->pre, "smollm");
  EXPECT_EQ(data->tokens, dump->tokens);
  EXPECT_EQ(data->token_types, dump->token_types);
  EXPECT_EQ(data->merges, dump->merges);
  EXPECT_EQ(data->bos_id, 1);
  EXPECT_EQ(data->eos_id, 2);
  EXPECT_EQ(data->unk_id, 0);
  EXPECT_EQ(data->pad_id, 2);
  EXPECT_FALSE(data->add_bos);

  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::Create(*std::move(data));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("Hello world", false, true),
            (std::vector<int32_t>{19556, 905}));

  absl::StatusOr<std::optional<std::string>> chat =
      ChatTemplateFromGguf(**gguf);
  ASSERT_TRUE(chat.ok()) << chat.status();
  ASSERT_TRUE(chat->has_value());
  EXPECT_NE((*chat)->find("<|im_start|>"), std::string::npos);
}

TEST(GgufLoaderTest, MissingTokensIsInvalidArgument) {
  testing::GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(**gguf);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("tokenizer.ggml.tokens"),
            std::string::npos);
}

TEST(GgufLoaderTest, DefaultsAndLlama3AddsBos) {
  testing::GgufWriter writer;
  writer.AddString("tokenizer.ggml.model", "gpt2");
  writer.AddString("tokenizer.ggml.pre", "llama-bpe");
  writer.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  writer.AddStringArray("tokenizer.ggml.merges", {"a b"});
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(**gguf);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->add_bos);
  EXPECT_TRUE(data->token_types.empty());
  EXPECT_EQ(data->bos_id, kNoToken);
  absl::StatusOr<std::optional<std::string>> chat =
      ChatTemplateFromGguf(**gguf);
  ASSERT_TRUE(chat.ok());
  EXPECT_FALSE(chat->has_value());
}

}  // namespace
}  // namespace braid::model
