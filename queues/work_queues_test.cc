#include "queues/work_queues.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braid::queues {
namespace {

using batching::WorkItem;
using ::testing::ElementsAre;

TEST(PolicyQueueTest, Fifo) {
  PolicyQueue q(QueuePolicy::kFifo);
  q.Push({1, 0, "a", 3});
  q.Push({2, 9, "b", 1});
  q.Push({3, -1, "a", 2});
  EXPECT_THAT(q.Ordered(), ElementsAre(2, 3, 1));
  q.Remove(3);
  q.Remove(42);
  EXPECT_THAT(q.Ordered(), ElementsAre(2, 1));
  EXPECT_EQ(q.size(), 2);
}

TEST(PolicyQueueTest, PriorityThenArrival) {
  PolicyQueue q(QueuePolicy::kPriority);
  q.Push({1, 0, "a", 1});
  q.Push({2, 5, "a", 2});
  q.Push({3, 0, "a", 3});
  q.Push({4, 5, "a", 4});
  EXPECT_THAT(q.Ordered(), ElementsAre(2, 4, 1, 3));
}

TEST(PolicyQueueTest, FairShareServesTheLeastServedTenantFirst) {
  PolicyQueue q(QueuePolicy::kFairShare);
  q.Push({1, 0, "a", 1});
  q.Push({2, 0, "a", 2});
  q.Push({3, 0, "b", 3});
  EXPECT_THAT(q.Ordered(), ElementsAre(1, 2, 3));  // tie: arrival
  q.Charge(1, 10);
  EXPECT_THAT(q.Ordered(), ElementsAre(3, 1, 2));
  q.Charge(3, 4);
  EXPECT_THAT(q.Ordered(), ElementsAre(3, 1, 2));
  q.Charge(3, 7);
  EXPECT_THAT(q.Ordered(), ElementsAre(1, 2, 3));
  // Priority still comes first.
  q.Push({4, 1, "a", 4});
  EXPECT_EQ(q.Ordered().front(), 4u);
}

TEST(PolicyQueueTest, NewTenantStartsLevelWithTheLeastServed) {
  PolicyQueue q(QueuePolicy::kFairShare);
  q.Push({1, 0, "a", 1});
  q.Charge(1, 100);
  q.Push({2, 0, "b", 2});
  EXPECT_EQ(q.served("b"), 100);  // no banked credit for being idle
  q.Remove(1);
  q.Remove(2);
  EXPECT_EQ(q.served("a"), 0);  // forgotten when it has nothing queued
}

TEST(PolicyQueueTest, ParsesPolicyNames) {
  EXPECT_EQ(*ParseQueuePolicy("fair"), QueuePolicy::kFairShare);
  EXPECT_EQ(*ParseQueuePolicy("fifo"), QueuePolicy::kFifo);
  EXPECT_EQ(*ParseQueuePolicy("priority"), QueuePolicy::kPriority);
  EXPECT_FALSE(ParseQueuePolicy("random").ok());
}

}  // namespace
}  // namespace braid::queues
