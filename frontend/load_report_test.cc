#include "frontend/load_report.h"

#include "gtest/gtest.h"
#include "proto/xds/data/orca/v3/orca_load_report.pb.h"

namespace braid::frontend {
namespace {

batching::EngineStats Stats(double busy_seconds, int64_t steps,
                            int64_t finished) {
  batching::EngineStats s;
  s.busy = absl::Seconds(busy_seconds);
  s.steps = steps;
  s.completed = finished;
  s.kv_blocks_total = 100;
  s.kv_blocks_free = 100;
  return s;
}

TEST(LoadTrackerTest, BusyShareRateAndStepTimeOverTheWindow) {
  LoadTracker t({.window = absl::Seconds(2), .reference_step_ms = 50});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  t.Observe(Stats(0.5, 5, 2), t0 + absl::Seconds(1));
  LoadSnapshot s = t.Current();
  EXPECT_DOUBLE_EQ(s.busy, 0.5);
  EXPECT_DOUBLE_EQ(s.rps, 2);
  EXPECT_DOUBLE_EQ(s.step_ms, 100);
  // Older samples leave the window: 2..4 s saw 1.5 s busy, 3 finished.
  t.Observe(Stats(1.0, 10, 3), t0 + absl::Seconds(2));
  t.Observe(Stats(2.0, 20, 5), t0 + absl::Seconds(4));
  s = t.Current();
  EXPECT_DOUBLE_EQ(s.busy, 0.5);
  EXPECT_DOUBLE_EQ(s.rps, 1);
  EXPECT_DOUBLE_EQ(s.step_ms, 100);
  // Idle: the busy share falls, the last step time is kept.
  t.Observe(Stats(2.0, 20, 5), t0 + absl::Seconds(6));
  s = t.Current();
  EXPECT_DOUBLE_EQ(s.busy, 0);
  EXPECT_DOUBLE_EQ(s.step_ms, 100);
}

TEST(LoadTrackerTest, OrcaReportCarriesUtilizationRateAndQueues) {
  LoadTracker t;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  batching::EngineStats a = Stats(0, 0, 0);
  t.Observe(a, t0);
  batching::EngineStats b = Stats(0.25, 4, 3);
  b.kv_blocks_free = 40;  // 60% used: above the busy share
  b.queue_sizes = {3, 0, 5};
  b.queue_running = {2, 0, 1};
  b.running = 3;
  t.Observe(b, t0 + absl::Seconds(1));
  xds::data::orca::v3::OrcaLoadReport report;
  ASSERT_TRUE(report.ParseFromString(t.OrcaReport()));
  EXPECT_DOUBLE_EQ(report.application_utilization(), 0.6);
  EXPECT_DOUBLE_EQ(report.cpu_utilization(), 0.25);
  EXPECT_DOUBLE_EQ(report.mem_utilization(), 0.6);
  EXPECT_DOUBLE_EQ(report.rps_fractional(), 3);
  EXPECT_DOUBLE_EQ(report.named_metrics().at("queue_io"), 1);
  EXPECT_DOUBLE_EQ(report.named_metrics().at("queue_reasoning"), 0);
  EXPECT_DOUBLE_EQ(report.named_metrics().at("queue_prompt"), 4);
  EXPECT_DOUBLE_EQ(report.named_metrics().at("waiting"), 5);
  EXPECT_DOUBLE_EQ(report.named_metrics().at("running"), 3);
  EXPECT_DOUBLE_EQ(report.utilization().at("kv"), 0.6);
}

TEST(LoadTrackerTest, AgentReplyFollowsStateSpeedAndQueue) {
  LoadTracker t({.window = absl::Seconds(2), .reference_step_ms = 50});
  EXPECT_EQ(t.AgentReply(), "down\n");  // loading
  t.SetState(ReplicaState::kServing);
  EXPECT_EQ(t.AgentReply(), "ready up 100%\n");  // no step measured yet
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  t.Observe(Stats(0.5, 20, 1), t0 + absl::Seconds(1));  // 25 ms steps
  EXPECT_EQ(t.AgentReply(), "ready up 200%\n");
  batching::EngineStats slow = Stats(1.5, 30, 2);  // 100 ms steps
  slow.queue_sizes = {1, 0, 0};                    // one waiting
  t.Observe(slow, t0 + absl::Seconds(4));          // the window: 1..4 s
  EXPECT_EQ(t.AgentReply(), "ready up 25%\n");
  t.SetState(ReplicaState::kStalled);
  EXPECT_EQ(t.AgentReply(), "down\n");
  t.SetState(ReplicaState::kDraining);
  EXPECT_EQ(t.AgentReply(), "drain\n");
}

TEST(LoadTrackerTest, AgentWeightIsClamped) {
  LoadTracker t({.window = absl::Seconds(2), .reference_step_ms = 1000});
  t.SetState(ReplicaState::kServing);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  t.Observe(Stats(0.1, 100, 0), t0 + absl::Seconds(1));  // 1 ms steps
  EXPECT_EQ(t.AgentReply(), "ready up 256%\n");
}

}  // namespace
}  // namespace braid::frontend
