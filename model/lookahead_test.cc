#include "model/lookahead.h"

#include <vector>

#include "gtest/gtest.h"

namespace braid::model {
namespace {

// Three one-token decode sequences of contexts 10, 20 and 30.
Batch Ahead() {
  Batch b;
  for (int i = 0; i < 3; ++i) {
    BatchSequence s;
    s.first_token = i;
    s.num_tokens = 1;
    s.num_cached = 10 * (i + 1);
    s.block_table = {4 * i, 4 * i + 1};
    s.kernel_tokens = 1;
    b.sequences.push_back(s);
    b.tokens.push_back(AheadToken(i));
    b.meta.push_back({0, s.num_cached});
  }
  return b;
}

TopLogits TopOf(std::vector<int32_t> top1) {
  TopLogits t;
  t.k = 2;
  for (int32_t id : top1) {
    t.ids.insert(t.ids.end(), {id, id + 1});
    t.values.insert(t.values.end(), {1.0f, 0.5f});
  }
  return t;
}

TEST(Lookahead, PlaceholdersResolveToTheirRowsTopToken) {
  ASSERT_TRUE(CheckAhead(Ahead(), 3).ok());
  const Batch r = ResolveAhead(Ahead(), TopOf({7, 8, 9}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{7, 8, 9}));
  Batch fixed = Ahead();
  fixed.tokens[1] = 42;  // a known token stays
  EXPECT_EQ(ResolveAhead(fixed, TopOf({7, 8, 9})).tokens,
            (std::vector<int32_t>{7, 42, 9}));
}

TEST(Lookahead, MalformedAheadBatchesAreRefused) {
  EXPECT_FALSE(CheckAhead(Ahead(), 2).ok());  // names row 2 of 2
  Batch two = Ahead();
  two.sequences[2].logits = BatchSequence::Logits::kNone;
  EXPECT_FALSE(CheckAhead(two, 3).ok());
  Batch longer = Ahead();
  longer.tokens.push_back(1);
  longer.meta.push_back({0, 31});
  longer.sequences[2].num_tokens = 2;
  EXPECT_FALSE(CheckAhead(longer, 3).ok());
}

// The same batch matches row for row; with a finished sequence dropped the
// rest match their rows; anything changed does not match.
TEST(Lookahead, TheSameStepOrItsRemainingSequencesMatch) {
  const Batch r = ResolveAhead(Ahead(), TopOf({7, 8, 9}));
  EXPECT_EQ(MatchAhead(r, r), (std::vector<int>{0, 1, 2}));
  Batch rest;
  for (int i : {0, 2}) {
    BatchSequence s = r.sequences[i];
    s.first_token = static_cast<int>(rest.tokens.size());
    rest.sequences.push_back(s);
    rest.tokens.push_back(r.tokens[i]);
    rest.meta.push_back(r.meta[i]);
  }
  EXPECT_EQ(MatchAhead(r, rest), (std::vector<int>{0, 2}));

  Batch other_token = r;
  other_token.tokens[1] = 100;
  EXPECT_FALSE(MatchAhead(r, other_token).has_value());
  Batch grown = r;  // a block more: the lookahead still holds
  grown.sequences[0].block_table.push_back(99);
  EXPECT_EQ(MatchAhead(r, grown), (std::vector<int>{0, 1, 2}));
  Batch other_table = r;
  other_table.sequences[0].block_table[1] = 99;
  EXPECT_FALSE(MatchAhead(r, other_table).has_value());
  Batch reordered = rest;
  std::swap(reordered.sequences[0], reordered.sequences[1]);
  std::swap(reordered.tokens[0], reordered.tokens[1]);
  std::swap(reordered.meta[0], reordered.meta[1]);
  reordered.sequences[0].first_token = 0;
  reordered.sequences[1].first_token = 1;
  EXPECT_FALSE(MatchAhead(r, reordered).has_value());
  Batch prefill = r;  // a sequence with two tokens
  prefill.tokens.push_back(5);
  prefill.meta.push_back({0, 31});
  prefill.sequences[2].num_tokens = 2;
  EXPECT_FALSE(MatchAhead(r, prefill).has_value());
}

}  // namespace
}  // namespace braid::model
