#include "model/cpu/split_chooser.h"

#include "gtest/gtest.h"

namespace braid::model {
namespace {

// Runs `steps` steps of `tokens` tokens whose row- and data-parallel times
// are `row` and `data` seconds; returns how many ran data-parallel.
int Steps(SplitChooser& c, int tokens, int steps, double row, double data) {
  int n_data = 0;
  for (int i = 0; i < steps; ++i) {
    const bool d = c.PickData(tokens);
    n_data += d;
    c.Record(tokens, d, d ? data : row);
  }
  return n_data;
}

TEST(SplitChooserTest, TriesEachWayThenRunsTheFasterAndProbesTheOther) {
  SplitChooser c;
  // Row-parallel, data-parallel, each twice; the first step of each pays
  // a one-time cost that its second does not.
  const double first[4] = {9.0e-3, 8.0e-3, 5.0e-3, 4.4e-3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c.PickData(8), i % 2 == 1) << i;
    c.Record(8, i % 2 == 1, first[i]);
  }
  // Data-parallel is faster: it runs, and row-parallel once in 32 steps.
  const int steps = 320;
  EXPECT_EQ(Steps(c, 8, steps, 5.0e-3, 4.4e-3),
            steps - steps / SplitChooser::kProbeEvery);
}

TEST(SplitChooserTest, AFirstSlowStepDoesNotDecide) {
  SplitChooser c;
  // Row-parallel's first step is slow (a cold cache), its second normal:
  // row-parallel, the faster, is chosen.
  const double first[4] = {9.0e-3, 5.4e-3, 5.0e-3, 5.4e-3};
  for (int i = 0; i < 4; ++i) c.Record(8, c.PickData(8), first[i]);
  EXPECT_EQ(Steps(c, 8, 64, 5.0e-3, 5.4e-3), 2);
}

TEST(SplitChooserTest, FollowsAChangeOfTheFasterWay) {
  SplitChooser c;
  Steps(c, 8, 64, 5.0e-3, 4.4e-3);
  // The machine changes: row-parallel becomes the faster (as when the
  // pool's threads move onto one core complex). Within a few probes the
  // choice follows, and stays.
  Steps(c, 8, 160, 4.6e-3, 5.0e-3);
  EXPECT_EQ(Steps(c, 8, 160, 4.6e-3, 5.0e-3), 160 / SplitChooser::kProbeEvery);
}

TEST(SplitChooserTest, BatchSizesKeepTheirOwnTimes) {
  SplitChooser c;
  Steps(c, 8, 64, 5.0e-3, 4.4e-3);   // 8 tokens: data-parallel faster
  Steps(c, 12, 64, 6.0e-3, 7.0e-3);  // 12 tokens: row-parallel faster
  EXPECT_EQ(Steps(c, 8, 64, 5.0e-3, 4.4e-3), 62);
  EXPECT_EQ(Steps(c, 12, 64, 6.0e-3, 7.0e-3), 2);
}

TEST(SplitChooserTest, OneSlowStepDoesNotFlipTheChoice) {
  SplitChooser c;
  Steps(c, 8, 64, 5.0e-3, 4.4e-3);
  // A data-parallel step the OS interrupted (10x its time) counts as 1.5x:
  // the average rises 10%, still under row-parallel's.
  const bool d = c.PickData(8);
  ASSERT_TRUE(d);
  c.Record(8, true, 44e-3);
  EXPECT_TRUE(c.PickData(8));
}

}  // namespace
}  // namespace braid::model
