#include "model/top_logits.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace braid::model {
namespace {

TEST(TopLogits, KeepsTheLargestInOrderWithTiesByIdAndTheLogSumExp) {
  // Row 0 ties 3.0 at ids 1, 4 and 6; row 1 is all equal.
  const std::vector<float> rows = {0.5f, 3.0f, -1.0f, 2.0f, 3.0f, 1.0f, 3.0f,
                                   1.0f, 1.0f, 1.0f,  1.0f, 1.0f, 1.0f, 1.0f};
  TopLogits out;
  ReduceLogits(rows.data(), 2, 7, TopRequest{4, true}, &out);
  ASSERT_EQ(out.num_rows(), 2);
  EXPECT_EQ(out.ids, (std::vector<int32_t>{1, 4, 6, 3, 0, 1, 2, 3}));
  EXPECT_EQ(out.values, (std::vector<float>{3, 3, 3, 2, 1, 1, 1, 1}));
  ASSERT_EQ(out.log_z.size(), 2u);
  double z = 0;
  for (int i = 0; i < 7; ++i) z += std::exp(double{rows[i]});
  EXPECT_NEAR(out.log_z[0], std::log(z), 1e-6);
  EXPECT_NEAR(out.log_z[1], 1.0 + std::log(7.0), 1e-6);
}

TEST(TopLogits, GreedyIsTheFirstOfTheLargest) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(0, 4);
  std::vector<float> row(1000);
  for (float& v : row) v = static_cast<float>(small(rng));
  TopLogits one, many;
  ReduceLogits(row.data(), 1, 1000, TopRequest{1, false}, &one);
  ReduceLogits(row.data(), 1, 1000, TopRequest{50, false}, &many);
  EXPECT_TRUE(one.log_z.empty());
  EXPECT_EQ(one.ids[0], many.ids[0]);
  int first = 0;
  for (int i = 0; i < 1000; ++i) {
    if (row[i] > row[first]) first = i;
  }
  EXPECT_EQ(one.ids[0], first);
  for (int j = 1; j < 50; ++j) {
    EXPECT_TRUE(many.values[j - 1] > many.values[j] ||
                (many.values[j - 1] == many.values[j] &&
                 many.ids[j - 1] < many.ids[j]));
  }
}

TEST(TopLogits, RequestsOutsideTheRangeAreRefused) {
  EXPECT_TRUE(CheckTopRequest({1, false}, 10).ok());
  EXPECT_TRUE(CheckTopRequest({10, true}, 10).ok());
  EXPECT_EQ(CheckTopRequest({0, false}, 10).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTopRequest({11, false}, 10).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTopRequest({kMaxTopLogits + 1, false}, 1 << 17).code(),
            absl::StatusCode::kInvalidArgument);
}

// Probabilities 0.1, 0.2, 0.3, 0.4 (logits log p at temperature 1): u
// picks the first id whose running sum passes it; temperature 0.5 squares
// and renormalises them.
TEST(TopLogits, DrawsWalkTheRowInIdOrder) {
  const std::vector<float> row = {std::log(0.1f), std::log(0.2f),
                                  std::log(0.3f), std::log(0.4f)};
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {1.0f, 0.05}), 0);
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {1.0f, 0.25}), 1);
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {1.0f, 0.55}), 2);
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {1.0f, 0.65}), 3);
  // Squared: 0.01, 0.04, 0.09, 0.16 of 0.3: the last id from u > 0.14/0.3.
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {2.0f, 0.40}), 2);
  EXPECT_EQ(DrawInIdOrder(row.data(), 4, {2.0f, 0.50}), 3);
  TopLogits out;
  TopRequest req;
  req.draws = {{1.0f, 0.25}};
  ReduceLogits(row.data(), 1, 4, req, &out);
  ASSERT_EQ(out.drawn.size(), 1u);
  EXPECT_EQ(out.drawn[0], 1);
  EXPECT_EQ(out.drawn_logit[0], row[1]);
  EXPECT_FALSE(CheckTopRequest(req, 4, 2).ok());  // one draw for two rows
  EXPECT_TRUE(CheckTopRequest(req, 4, 1).ok());
}

// Repetition divides positive logits and multiplies the others; frequency
// and presence reach only generated tokens; ids outside the row are left.
// A reduction with penalties is the penalized row's, the input untouched.
TEST(TopLogits, PenaltiesChangeTheRowBeforeItIsReduced) {
  const std::vector<float> row = {2.0f, -1.0f, 3.0f, 0.5f, 1.0f};
  RowPenalties p;
  p.repetition = 2.0f;
  p.frequency = 0.5f;
  p.presence = 0.25f;
  p.ids = {0, 1, 2, 7};
  p.output_counts = {0, 2, 1, 1};
  std::vector<float> penalized = row;
  ApplyPenalties(p, penalized.data(), 5);
  EXPECT_EQ(penalized, (std::vector<float>{1.0f, -3.25f, 0.75f, 0.5f, 1.0f}));
  TopRequest req{2, true};
  req.penalties = {p};
  TopLogits out;
  ReduceLogits(row.data(), 1, 5, req, &out);
  EXPECT_EQ(out.ids, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(out.values, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(out.log_z[0], LogSumExp(penalized.data(), 5));
  EXPECT_EQ(row[0], 2.0f);
  EXPECT_FALSE(CheckTopRequest(req, 5, 2).ok());  // one penalty, two rows
  EXPECT_TRUE(CheckTopRequest(req, 5, 1).ok());
  req.penalties[0].output_counts.pop_back();
  EXPECT_FALSE(CheckTopRequest(req, 5).ok());
}

}  // namespace
}  // namespace braid::model
