// Golden test: braid's tokenizer must reproduce llama.cpp's ids exactly on
// every case in testdata/tokenize_golden.tsv (made by
// tools/golden/make_tokenize_golden.py with add_bos=False, special=True).

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/tokenizer/testing/vocab_file.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::model {
namespace {

TEST(TokenizeGoldenTest, MatchesLlamaCppOnEveryCase) {
  const Tokenizer& tok = testing::SmolLm2Tokenizer();
  std::ifstream in(testing::TestDataPath("tokenize_golden.tsv"));
  ASSERT_TRUE(in) << "missing tokenize_golden.tsv";
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
    if (got == want) {
      ++matched;
    } else {
      ADD_FAILURE() << "case " << total << " text=\"" << absl::CEscape(text)
                    << "\"\n  want: " << absl::StrJoin(want, " ")
                    << "\n  got:  " << absl::StrJoin(got, " ");
    }
  }
  printf("golden: %d/%d identical\n", matched, total);
  EXPECT_GE(total, 250);
  EXPECT_EQ(matched, total);
}

}  // namespace
}  // namespace braid::model
