#include "model/tokenizer/streaming_detokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/tokenizer/testing/vocab_file.h"
#include "model/tokenizer/unicode.h"

namespace braid::model {
namespace {

using testing::SmolLm2Tokenizer;

TEST(StreamingDetokenizerTest, NeverYieldsBrokenCharacters) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  int held_back = 0;
  for (const std::string text :
       {"😀😃😄 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸",
        "日本語のテキストと漢字、中文文本测试。",
        "mixed: café ☕ 咖啡 🤖 — Ελληνικά",
        "ᚠᚢᚦᚨᚱᚲ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🧑🏿‍🚀"}) {
    const std::vector<int32_t> ids = tok.Encode(text, false, false);
    StreamingDetokenizer stream(&tok);
    std::string joined;
    for (int32_t id : ids) {
      const std::string chunk = stream.Push(id);
      EXPECT_TRUE(IsValidUtf8(chunk)) << text;
      held_back += stream.pending_bytes() > 0;
      joined += chunk;
    }
    const std::string rest = stream.Flush();
    EXPECT_TRUE(rest.empty());
    joined += rest;
    EXPECT_EQ(joined, tok.Decode(ids));
    EXPECT_EQ(joined, text);
  }
  // The inputs must actually split characters across tokens.
  EXPECT_GT(held_back, 0);
}

TEST(StreamingDetokenizerTest, HoldsPartialCharacterUntilComplete) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  // Byte-level tokens for the three bytes of 中 (E4 B8 AD).
  auto byte_token = [&](uint8_t b) {
    return *tok.FindToken(std::string(1, static_cast<char>(b)));
  };
  StreamingDetokenizer stream(&tok);
  EXPECT_EQ(stream.Push(*tok.FindToken("a")), "a");
  EXPECT_EQ(stream.Push(byte_token(0xE4)), "");
  EXPECT_EQ(stream.Push(byte_token(0xB8)), "");
  EXPECT_EQ(stream.pending_bytes(), 2u);
  EXPECT_EQ(stream.Push(byte_token(0xAD)), "中");
  EXPECT_EQ(stream.pending_bytes(), 0u);
}

TEST(StreamingDetokenizerTest, FlushReplacesIncompleteTail) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  StreamingDetokenizer stream(&tok);
  EXPECT_EQ(stream.Push(*tok.FindToken(std::string(1, '\xF0'))), "");
  EXPECT_EQ(stream.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& tok = SmolLm2Tokenizer();
  StreamingDetokenizer stream(&tok);
  // A stray continuation byte can never complete: emitted at once as U+FFFD.
  EXPECT_EQ(stream.Push(*tok.FindToken(std::string(1, '\x80'))),
            "\xEF\xBF\xBD");
  EXPECT_EQ(stream.Push(2), "<|im_end|>");  // Special tokens as their text.
}

}  // namespace
}  // namespace braid::model
