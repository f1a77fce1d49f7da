#include "model/tokenizer/tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/testing/vocab_file.h"

namespace braid::model {
namespace {

using Ids = std::vector<int32_t>;
using testing::SmolLm2Tokenizer;

// A tiny byte-level vocabulary: "a", "b", "c", "ab", "bc", "abc".
TokenizerData TinyData() {
  TokenizerData data;
  data.pre = "gpt2";
  data.tokens = {"a", "b", "c", "ab", "bc", "abc", "<s>", "</s>", "<tool>"};
  data.token_types = {
      TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
      TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
      TokenType::kControl, TokenType::kControl, TokenType::kUserDefined};
  data.merges = {"b c", "a b", "a bc"};
  data.bos_id = 6;
  data.eos_id = 7;
  return data;
}

std::unique_ptr<Tokenizer> Make(TokenizerData data) {
  auto tok = Tokenizer::Create(std::move(data));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(TokenizerTest, MergesApplyByRankNotPosition) {
  auto tok = Make(TinyData());
  // "b c" (rank 0) beats "a b" (rank 1); then "a bc" (rank 2) -> abc.
  EXPECT_EQ(tok->Encode("abc", false, false), (Ids{5}));
  EXPECT_EQ(tok->Encode("ab", false, false), (Ids{3}));
  EXPECT_EQ(tok->Encode("cab", false, false), (Ids{2, 3}));
}

TEST(TokenizerTest, UnknownSymbolFallsBackToBytes) {
  TokenizerData data = TinyData();
  data.tokens[5] = "xyz";  // "abc" is merged but no longer a token.
  auto tok = Make(std::move(data));
  EXPECT_EQ(tok->Encode("abc", false, false), (Ids{0, 1, 2}));
}

TEST(TokenizerTest, AddSpecialFollowsModelFlags) {
  TokenizerData data = TinyData();
  data.add_bos = true;
  data.add_eos = true;
  auto tok = Make(std::move(data));
  EXPECT_EQ(tok->Encode("ab", true, false), (Ids{6, 3, 7}));
  EXPECT_EQ(tok->Encode("ab", false, false), (Ids{3}));
  EXPECT_EQ(tok->Encode("", true, false), (Ids{6, 7}));
}

TEST(TokenizerTest, ParseSpecialControlsControlTokensOnly) {
  auto tok = Make(TinyData());
  EXPECT_EQ(tok->Encode("<s>ab", false, true), (Ids{6, 3}));
  // Without parse_special "<s>" is text; "<" is not in this vocabulary.
  EXPECT_EQ(tok->Encode("<s>ab", false, false), (Ids{3}));
  // USER_DEFINED tokens are always matched, as in llama.cpp.
  EXPECT_EQ(tok->Encode("ab<tool>", false, false), (Ids{3, 8}));
}

TEST(TokenizerTest, Llama3IgnoresMergesForWholeWordTokens) {
  TokenizerData data = TinyData();
  data.pre = "llama3";
  data.merges = {"a b"};  // No merge reaches "abc"...
  auto tok = Make(std::move(data));
  EXPECT_EQ(tok->Encode("abc", false, false),
            (Ids{5}));  // ...but it's a token.
}

TEST(TokenizerTest, CreateRejectsBadData) {
  TokenizerData data = TinyData();
  data.model = "rwkv";  // not a tokenizer braid reads
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
  data = TinyData();
  data.model = "llama";  // SentencePiece, with a score missing
  data.scores.assign(data.tokens.size() - 1, 0.0f);
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
  data = TinyData();
  data.pre = "klingon";
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
  data = TinyData();
  data.merges.push_back("nospace");
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
  data = TinyData();
  data.eos_id = 99;
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
  data = TinyData();
  data.token_types.pop_back();
  EXPECT_EQ(Tokenizer::Create(data).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, SmolLm2Basics) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.Encode("Hello world", true, true), (Ids{19556, 905}));
  EXPECT_EQ(tok.Encode("<|im_start|>user", false, true), (Ids{1, 4093}));
  EXPECT_NE(tok.Encode("<|im_start|>user", false, false)[0], 1);
  EXPECT_EQ(tok.TokenBytes(905), " world");
  EXPECT_EQ(tok.TokenBytes(2), "<|im_end|>");
  EXPECT_EQ(tok.TokenBytes(-1), "");
  EXPECT_EQ(tok.TokenBytes(49152), "");
  EXPECT_EQ(tok.FindToken("<|im_end|>"), 2);
  EXPECT_EQ(tok.FindToken(" world"), 905);
  EXPECT_FALSE(tok.FindToken("no such token at all").has_value());
}

TEST(TokenizerTest, SmolLm2EndOfGenerationAndControl) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  EXPECT_TRUE(tok.IsEndOfGeneration(2));  // <|im_end|> (eos)
  EXPECT_TRUE(tok.IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE(tok.IsEndOfGeneration(1));
  EXPECT_FALSE(tok.IsEndOfGeneration(905));
  EXPECT_FALSE(tok.IsEndOfGeneration(-1));
  EXPECT_EQ(tok.eot_id(), 2);
  EXPECT_TRUE(tok.IsControl(1));
  EXPECT_FALSE(tok.IsControl(905));
  EXPECT_FALSE(tok.IsControl(1 << 20));
}

TEST(TokenizerTest, DecodeRoundTripsAnyBytes) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  for (const std::string text :
       {"plain", "  spaces\tand\nnewlines  ", "東京 😀 👨‍👩‍👧",
        "x = f(12345);", "bad \x80\x81 bytes \xE4\xB8 end", "\x80", "\xC3",
        "ok\xF0\x9F\x98"}) {
    const Ids ids = tok.Encode(text, false, false);
    EXPECT_FALSE(ids.empty()) << text;
    EXPECT_EQ(tok.Decode(ids), text);
  }
}

TEST(TokenizerTest, BytesMissingFromVocabularyAreDroppedLikeLlamaCpp) {
  // SmolLM2's vocabulary has no token for 21 byte values (0xFF, 0xFE, ...);
  // llama.cpp drops such bytes and so do we. Nothing crashes.
  const Tokenizer& tok = SmolLm2Tokenizer();
  const Ids ids = tok.Encode(
      "a\xFF\xFE"
      "b",
      false, false);
  EXPECT_EQ(tok.Decode(ids), "ab");
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  const std::string text =
      "<|im_start|>user\nTranslate 'good morning' to 日本語 😀 x=42<|im_end|>";
  const Ids want = tok.Encode(text, false, true);
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i)
        bad[t] += tok.Encode(text, false, true) != want;
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace braid::model
