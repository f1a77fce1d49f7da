#include "server/watchdog.h"

#include "gtest/gtest.h"

namespace braid::server {
namespace {

using Change = StepWatchdog::Change;

batching::EngineStats InStep(absl::Time started) {
  batching::EngineStats s;
  s.step_started = started;
  return s;
}

TEST(StepWatchdogTest, StallsOncePastTheBoundAndRecoversWhenTheStepEnds) {
  StepWatchdog w(absl::Seconds(5));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(w.Check(batching::EngineStats{}, t0), Change::kNone);  // idle
  EXPECT_EQ(w.Check(InStep(t0), t0 + absl::Seconds(5)), Change::kNone);
  EXPECT_EQ(w.Check(InStep(t0), t0 + absl::Seconds(6)), Change::kStalled);
  EXPECT_TRUE(w.stalled());
  EXPECT_EQ(w.Check(InStep(t0), t0 + absl::Seconds(9)), Change::kNone);
  EXPECT_EQ(w.stuck_for(), absl::Seconds(9));
  // The next step began: steps flow again.
  EXPECT_EQ(w.Check(InStep(t0 + absl::Seconds(10)), t0 + absl::Seconds(10)),
            Change::kRecovered);
  EXPECT_FALSE(w.stalled());
  EXPECT_EQ(w.Check(batching::EngineStats{}, t0 + absl::Seconds(11)),
            Change::kNone);
}

TEST(StepWatchdogTest, RecoversBetweenSteps) {
  StepWatchdog w(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(w.Check(InStep(t0), t0 + absl::Seconds(2)), Change::kStalled);
  EXPECT_EQ(w.Check(batching::EngineStats{}, t0 + absl::Seconds(3)),
            Change::kRecovered);
}

TEST(StepWatchdogTest, ZeroBoundIsOff) {
  StepWatchdog w(absl::ZeroDuration());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(w.Check(InStep(t0), t0 + absl::Hours(1)), Change::kNone);
}

}  // namespace
}  // namespace braid::server
