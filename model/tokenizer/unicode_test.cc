#include "model/tokenizer/unicode.h"

#include <string>

#include "gtest/gtest.h"

namespace braid::model {
namespace {

TEST(UnicodeTest, ByteLevelAlphabetMatchesGpt2) {
  EXPECT_EQ(ByteToUnicode(' '), "Ġ");
  EXPECT_EQ(ByteToUnicode('\n'), "Ċ");
  EXPECT_EQ(ByteToUnicode('\t'), "ĉ");
  EXPECT_EQ(ByteToUnicode('a'), "a");
  EXPECT_EQ(ByteToUnicode(0xAD), "Ń");  // Soft hyphen is remapped.
  EXPECT_EQ(ByteToUnicode(0xE9), "é");
}

TEST(UnicodeTest, ByteLevelRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string mapped = BytesToByteLevel(all);
  EXPECT_TRUE(IsValidUtf8(mapped));
  EXPECT_EQ(ByteLevelToBytes(mapped), all);
}

TEST(UnicodeTest, ValidUtf8Length) {
  EXPECT_EQ(ValidUtf8Length("a", 0), 1u);
  EXPECT_EQ(ValidUtf8Length("é", 0), 2u);
  EXPECT_EQ(ValidUtf8Length("中", 0), 3u);
  EXPECT_EQ(ValidUtf8Length("😀", 0), 4u);
  EXPECT_EQ(ValidUtf8Length("\xC0\xAF", 0), 0u);          // Overlong.
  EXPECT_EQ(ValidUtf8Length("\xED\xA0\x80", 0), 0u);      // Surrogate.
  EXPECT_EQ(ValidUtf8Length("\xF4\x90\x80\x80", 0), 0u);  // > U+10FFFF.
  EXPECT_EQ(ValidUtf8Length("\xE4\xB8", 0), 0u);          // Truncated.
  EXPECT_EQ(ValidUtf8Length("\x80", 0), 0u);
}

TEST(UnicodeTest, CompleteUtf8PrefixHoldsBackOnlyPendingSequences) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8"), 2u);      // Half of 中.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xF0\x9F\x98"), 2u);  // 3/4 of 😀.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xF0"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8\xAD"), 5u);  // Complete.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xFF"), 3u);      // Never valid: not held.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE0\x80"), 4u);  // Overlong: not held.
  EXPECT_EQ(CompleteUtf8Prefix("ab\x80\x80"), 4u);  // Stray continuations.
}

TEST(UnicodeTest, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xE4\xB8"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("ok 中"), "ok 中");
}

}  // namespace
}  // namespace braid::model
