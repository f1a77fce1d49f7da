#include "model/tokenizer/pre_tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace braid::model {
namespace {

std::vector<std::string> Split(std::string_view pre, std::string_view text) {
  auto tok = PreTokenizer::Create(pre);
  EXPECT_TRUE(tok.ok()) << tok.status();
  std::vector<std::string> out;
  for (std::string_view piece : (*tok)->Split(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizerTest, SmolLmSplitsEveryDigit) {
  EXPECT_EQ(Split("smollm", "abc 12345"),
            (Pieces{"abc", " ", "1", "2", "3", "4", "5"}));
}

TEST(PreTokenizerTest, Gpt2Pattern) {
  EXPECT_EQ(Split("gpt2", "Hello world  it's 42!!"),
            (Pieces{"Hello", " world", " ", " it", "'s", " 42", "!!"}));
  EXPECT_EQ(Split("gpt2", "a\tb"), (Pieces{"a", "\t", "b"}));
  EXPECT_EQ(Split("gpt2", "end  "), (Pieces{"end", "  "}));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(Split("llama3", "x 1234567"),
            (Pieces{"x", " ", "123", "456", "7"}));
  EXPECT_EQ(Split("llama3", "I'M here\n\n"),
            (Pieces{"I", "'M", " here", "\n\n"}));
}

TEST(PreTokenizerTest, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(Split("qwen2", "ab12"), (Pieces{"ab", "1", "2"}));
}

TEST(PreTokenizerTest, UnicodeCategories) {
  EXPECT_EQ(Split("gpt2", "café 東京"), (Pieces{"café", " 東京"}));
}

TEST(PreTokenizerTest, UnknownNameIsInvalidArgument) {
  auto tok = PreTokenizer::Create("no-such-pre");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PreTokenizerTest, InvalidUtf8KeepsEveryByte) {
  const std::string text = "ab\xFF\xFE cd\xE4\xB8 x\x80";
  auto tok = PreTokenizer::Create("smollm");
  ASSERT_TRUE(tok.ok());
  std::string joined;
  for (std::string_view piece : (*tok)->Split(text)) {
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizerTest, ConcurrentSplitsAgree) {
  auto tok = PreTokenizer::Create("smollm");
  ASSERT_TRUE(tok.ok());
  const std::string text = "The year 2024 was 😀 and 東京 was busy.  Fin\n";
  const size_t want = (*tok)->Split(text).size();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i)
        bad[t] += (*tok)->Split(text).size() != want;
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace braid::model
