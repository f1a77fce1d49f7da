// Golden test: braid's tokenizer must reproduce llama.cpp's ids exactly on
// every case in testdata/tokenize_golden.tsv (SmolLM2's byte-level BPE, made
// by tools/golden/make_tokenize_golden.py with add_bos=False, special=True)
// and testdata/tokenize_spm_golden.tsv (the same strings through a
// SentencePiece vocabulary trained for the test, testdata/spm_vocab.gguf;
// tools/golden/make_spm_golden.py), and the Llama 3 and Qwen2
// pre-tokenizers' files.

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/testing/vocab_file.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::model {
namespace {

// Every line of `fixture` tokenizes with `tok` to llama.cpp's ids; with
// `round_trip`, the ids also decode back to the text.
void ExpectGolden(const Tokenizer& tok, const std::string& fixture,
                  bool round_trip) {
  std::ifstream in(testing::TestDataPath(fixture));
  ASSERT_TRUE(in) << "missing " << fixture;
  int total = 0, matched = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    ASSERT_EQ(cols.size(), 2u) << line;
    const std::string text = absl::HexStringToBytes(cols[0]);
    std::vector<int32_t> want;
    for (absl::string_view id :
         absl::StrSplit(cols[1], ' ', absl::SkipEmpty())) {
      int32_t v;
      ASSERT_TRUE(absl::SimpleAtoi(id, &v)) << line;
      want.push_back(v);
    }
    const std::vector<int32_t> got =
        tok.Encode(text, /*add_special=*/false, /*parse_special=*/true);
    ++total;
    if (round_trip && got == want) {
      EXPECT_EQ(tok.Decode(got), text) << "case " << total;
    }
    if (got == want) {
      ++matched;
    } else {
      ADD_FAILURE() << "case " << total << " text=\"" << absl::CEscape(text)
                    << "\"\n  want: " << absl::StrJoin(want, " ")
                    << "\n  got:  " << absl::StrJoin(got, " ");
    }
  }
  printf("%s: %d/%d identical\n", fixture.c_str(), matched, total);
  EXPECT_GE(total, 250);
  EXPECT_EQ(matched, total);
}

TEST(TokenizeGoldenTest, MatchesLlamaCppOnEveryCase) {
  ExpectGolden(testing::SmolLm2Tokenizer(), "tokenize_golden.tsv", false);
}

// The same vocabulary under the Llama 3 and Qwen2 pre-tokenizers
// (tools/golden/make_pre_golden.py: llama.cpp with SmolLM2's vocabulary and
// tokenizer.ggml.pre replaced).
TEST(TokenizeGoldenTest, OtherPreTokenizersMatchLlamaCppOnEveryCase) {
  for (const std::string pre : {"llama-bpe", "qwen2"}) {
    auto data =
        testing::ReadVocabFile(testing::TestDataPath("smollm2_vocab.txt"));
    ASSERT_TRUE(data.ok()) << data.status();
    data->pre = pre;
    auto tok = Tokenizer::Create(*std::move(data));
    ASSERT_TRUE(tok.ok()) << tok.status();
    ExpectGolden(**tok, "tokenize_" + pre + "_golden.tsv", false);
  }
}

TEST(TokenizeGoldenTest, SentencePieceMatchesLlamaCppOnEveryCase) {
  auto file = GgufFile::Open(testing::TestDataPath("spm_vocab.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto data = TokenizerDataFromGguf(**file);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->model, "llama");
  EXPECT_TRUE(data->add_bos);
  auto tok = Tokenizer::Create(*std::move(data));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // SentencePiece's own conventions: a space prefix, BOS with add_special,
  // U+2581 shown as a space, <0xXX> byte tokens as their bytes.
  EXPECT_EQ((*tok)->Encode("Hello", true, false).front(), (*tok)->bos_id());
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("Hello world", false, false)),
            "Hello world");
  // Text with no special tokens decodes back to itself (control tokens in
  // the corpus decode to their text, with no space prefix after them).
  ExpectGolden(**tok, "tokenize_spm_golden.tsv", false);
}

}  // namespace
}  // namespace braid::model
