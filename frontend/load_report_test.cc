#include "frontend/load_report.h"

#include "gtest/gtest.h"
#include "proto/xds/data/orca/v3/orca_load_report.pb.h"

namespace braid::frontend {
namespace {

batching::EngineStats Stats(double busy_seconds, int64_t steps,
                            int64_t finished, double request_seconds = 0) {
  batching::EngineStats s;
  s.busy = absl::Seconds(busy_seconds);
  s.steps = steps;
  s.completed = finished;
  s.request_time = absl::Seconds(request_seconds);
  s.kv_blocks_total = 100;
  s.kv_blocks_free = 100;
  return s;
}

TEST(LoadTrackerTest, BusyShareRateAndStepTimeOverTheWindow) {
  LoadTracker t({.window = absl::Seconds(2)});
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

TEST(LoadTrackerTest, OccupancyByLittlesLaw) {
  LoadTracker t({.window = absl::Seconds(5), .max_num_seqs = 4});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  // 4 requests in 2 s, 1.5 s each in the engine: 3 in flight of 4 slots.
  t.Observe(Stats(1.0, 10, 4, 6.0), t0 + absl::Seconds(2));
  LoadSnapshot s = t.Current();
  EXPECT_DOUBLE_EQ(s.rps, 2);
  EXPECT_DOUBLE_EQ(s.request_seconds, 1.5);
  EXPECT_DOUBLE_EQ(s.occupancy, 0.75);
  EXPECT_DOUBLE_EQ(s.utilization(), 0.75);
  // A balancer's weight, rate / utilisation, is slots / request time.
  EXPECT_DOUBLE_EQ(s.rps / s.utilization(), 4 / 1.5);
  // Nothing finished in the window: no rate, no occupancy.
  t.Observe(Stats(1.0, 10, 4, 6.0), t0 + absl::Seconds(8));
  t.Observe(Stats(1.0, 10, 4, 6.0), t0 + absl::Seconds(14));
  s = t.Current();
  EXPECT_DOUBLE_EQ(s.rps, 0);
  EXPECT_DOUBLE_EQ(s.occupancy, 0);
}

TEST(LoadTrackerTest, OrcaReportCarriesUtilizationRateAndQueues) {
  LoadTracker t({.max_num_seqs = 64});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  batching::EngineStats a = Stats(0, 0, 0);
  t.Observe(a, t0);
  batching::EngineStats b = Stats(0.25, 4, 3, 1.5);
  b.kv_blocks_free = 40;  // 60% used: above the occupancy
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
  EXPECT_DOUBLE_EQ(report.named_metrics().at("request_seconds"), 0.5);
  EXPECT_DOUBLE_EQ(report.utilization().at("occupancy"), 3 * 0.5 / 64);
  EXPECT_DOUBLE_EQ(report.utilization().at("kv"), 0.6);
}

TEST(LoadTrackerTest, AgentReplyFollowsStateAndCapacity) {
  LoadTracker t({.window = absl::Seconds(2),
                 .max_num_seqs = 64,
                 .reference_capacity = 100});
  EXPECT_EQ(t.AgentReply(), "down\n");  // loading
  t.SetState(ReplicaState::kServing);
  EXPECT_EQ(t.AgentReply(), "ready up 100%\n");  // nothing finished yet
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  // 0.32 s a request: capacity 64 / 0.32 = 200.
  t.Observe(Stats(0.5, 20, 10, 3.2), t0 + absl::Seconds(1));
  EXPECT_DOUBLE_EQ(t.Current().capacity, 200);
  EXPECT_EQ(t.AgentReply(), "ready up 200%\n");
  // Slower (a queue, a slower machine): 1.28 s a request, 50%.
  t.Observe(Stats(1.5, 30, 20, 16.0), t0 + absl::Seconds(4));
  EXPECT_EQ(t.AgentReply(), "ready up 50%\n");
  // Jitter within 5% leaves the weight as it was: 64 / 1.333 = 48.
  t.Observe(Stats(1.5, 30, 30, 29.87), t0 + absl::Seconds(5));
  EXPECT_NEAR(t.Current().capacity, 48, 0.01);
  EXPECT_EQ(t.AgentReply(), "ready up 50%\n");
  // Idle: the last capacity stands.
  t.Observe(Stats(1.5, 30, 20, 16.0), t0 + absl::Seconds(10));
  t.Observe(Stats(1.5, 30, 20, 16.0), t0 + absl::Seconds(13));
  EXPECT_EQ(t.AgentReply(), "ready up 50%\n");
  t.SetState(ReplicaState::kStalled);
  EXPECT_EQ(t.AgentReply(), "down\n");
  t.SetState(ReplicaState::kDraining);
  EXPECT_EQ(t.AgentReply(), "drain\n");
}

TEST(LoadTrackerTest, AgentWeightIsClamped) {
  LoadTracker t({.window = absl::Seconds(2),
                 .max_num_seqs = 64,
                 .reference_capacity = 1});
  t.SetState(ReplicaState::kServing);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe(Stats(0, 0, 0), t0);
  t.Observe(Stats(0.1, 100, 10, 1.0), t0 + absl::Seconds(1));
  EXPECT_EQ(t.AgentReply(), "ready up 256%\n");
}

}  // namespace
}  // namespace braid::frontend
