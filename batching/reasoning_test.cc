#include "batching/reasoning.h"

#include <vector>

#include "gtest/gtest.h"

namespace braid::batching {
namespace {

constexpr ReasoningMarkers kMarkers{/*think_start_id=*/90, /*think_end_id=*/91};

TEST(ReasoningGateTest, RoutesTokensBetweenTheMarkers) {
  ReasoningGate g(kMarkers, {}, std::vector<int32_t>{1, 2});
  EXPECT_FALSE(g.Next(5).reasoning);
  EXPECT_TRUE(g.Next(90).reasoning);  // the start marker
  EXPECT_TRUE(g.Next(6).reasoning);
  EXPECT_TRUE(g.Next(91).reasoning);  // the end marker
  EXPECT_FALSE(g.Next(7).reasoning);
  EXPECT_EQ(g.num_reasoning(), 3);
}

TEST(ReasoningGateTest, APromptMayOpenThinking) {
  ReasoningGate g(kMarkers, {}, std::vector<int32_t>{1, 90, 3});
  EXPECT_TRUE(g.Next(5).reasoning);
}

TEST(ReasoningGateTest, BudgetForcesTheEndMarker) {
  ReasoningGate g(kMarkers, {.budget = 2}, std::vector<int32_t>{90});
  EXPECT_FALSE(g.Next(5).forced);
  EXPECT_FALSE(g.Next(6).forced);
  const ReasoningGate::Decision d = g.Next(7);
  EXPECT_TRUE(d.forced);
  EXPECT_EQ(d.token, 91);
  EXPECT_TRUE(d.reasoning);
  EXPECT_FALSE(g.thinking());
  EXPECT_FALSE(g.Next(8).reasoning);
}

// Input placed in a session's context: its markers count as a prompt's, its
// tokens not against the budget.
TEST(ReasoningGateTest, ObservedInputOpensThinkingOutsideTheBudget) {
  ReasoningGate g(kMarkers, {.budget = 2}, std::vector<int32_t>{1});
  EXPECT_FALSE(g.Next(5).reasoning);
  g.Observe(std::vector<int32_t>{90, 7, 8});
  EXPECT_TRUE(g.thinking());
  EXPECT_FALSE(g.Next(6).forced);
  EXPECT_FALSE(g.Next(6).forced);
  EXPECT_TRUE(g.Next(6).forced);
  g.Observe(std::vector<int32_t>{90, 91});  // opened and closed
  EXPECT_FALSE(g.Next(6).reasoning);
  EXPECT_EQ(g.num_reasoning(), 3);
}

TEST(ReasoningGateTest, NoMarkersNoReasoning) {
  ReasoningGate g({}, {.budget = 1}, std::vector<int32_t>{});
  for (int t = 0; t < 5; ++t) EXPECT_FALSE(g.Next(t).reasoning);
}

}  // namespace
}  // namespace braid::batching
