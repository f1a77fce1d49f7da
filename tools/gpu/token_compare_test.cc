#include "tools/gpu/token_compare.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace braid::gpu_check {
namespace {

// A greedy token `id` whose runner-up is `second`, `gap` nats below.
Token Greedy(int32_t id, int32_t second, float gap, float logprob = -1.0f) {
  return {id, logprob, id, second, logprob, logprob - gap};
}

TEST(CompareTest, EqualOutputs) {
  const std::vector<Token> a = {Greedy(5, 6, 1.0f, -1.0f),
                                Greedy(7, 8, 1.0f, -2.0f)};
  std::vector<Token> b = a;
  b[1].logprob = -2.25f;
  const Parting p = Compare(a, b, 0.1);
  EXPECT_EQ(p.position, -1);
  EXPECT_TRUE(p.tolerated);
  EXPECT_EQ(p.equal_tokens, 2);
  EXPECT_DOUBLE_EQ(p.max_logprob_diff, 0.25);
}

TEST(CompareTest, PartingAtANearTieIsTolerated) {
  const std::vector<Token> cpu = {Greedy(5, 6, 1.0f), Greedy(7, 8, 0.05f),
                                  Greedy(1, 2, 1.0f)};
  const std::vector<Token> cuda = {Greedy(5, 6, 1.0f), Greedy(8, 7, 0.04f),
                                   Greedy(3, 4, 1.0f)};
  const Parting p = Compare(cpu, cuda, 0.1);
  EXPECT_EQ(p.position, 1);
  EXPECT_NEAR(p.cpu_gap_nats, 0.05, 1e-6);
  EXPECT_TRUE(p.tolerated);
  EXPECT_EQ(p.equal_tokens, 1);
  EXPECT_FALSE(Compare(cpu, cuda, 0.01).tolerated);
}

TEST(CompareTest, PartingToAnythingButTheSecondChoiceIsNot) {
  const std::vector<Token> cpu = {Greedy(5, 6, 0.01f)};
  const std::vector<Token> cuda = {Greedy(9, 5, 0.01f)};
  const Parting p = Compare(cpu, cuda, 0.1);
  EXPECT_EQ(p.position, 0);
  EXPECT_TRUE(std::isinf(p.cpu_gap_nats));
  EXPECT_FALSE(p.tolerated);
}

TEST(CompareTest, AShorterOutputParts) {
  const std::vector<Token> cpu = {Greedy(5, 6, 1.0f), Greedy(7, 8, 1.0f)};
  const Parting p = Compare(cpu, {cpu[0]}, 0.1);
  EXPECT_EQ(p.position, 1);
  EXPECT_FALSE(p.tolerated);
  EXPECT_EQ(Ids(cpu), (std::vector<int32_t>{5, 7}));
}

}  // namespace
}  // namespace braid::gpu_check
