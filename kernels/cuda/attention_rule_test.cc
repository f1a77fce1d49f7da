// The CUDA kernels' visibility predicate (attention_rule.h) against
// kernels/cpu's EntryVisible, the oracle, on the host.
#include "kernels/cuda/attention_rule.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention/attention.h"

namespace braid::kernels::cuda {
namespace {

constexpr int32_t kStreams = 4;
constexpr int32_t kPositions = 13;

// The streams whose bit is set in mask.
std::vector<int32_t> StreamsOf(int mask) {
  std::vector<int32_t> streams;
  for (int32_t s = 0; s < kStreams; ++s) {
    if (mask & (1 << s)) streams.push_back(s);
  }
  return streams;
}

// Every query and entry tag of streams 0..3 at y 0..12, every set of visible
// streams and windows 0 (none), 1 (only the query's own position) and 3.
TEST(AttentionRuleTest, EqualsCpuRuleExhaustively) {
  int64_t visible_pairs = 0, cases = 0;
  for (int mask = 0; mask < (1 << kStreams); ++mask) {
    const std::vector<int32_t> visible = StreamsOf(mask);
    cpu::PagedAttentionSeq seq;
    seq.visible_streams = visible.data();
    seq.num_visible_streams = static_cast<int64_t>(visible.size());
    const int32_t n = static_cast<int32_t>(visible.size());
    for (int32_t window : {0, 1, 3}) {
      for (int32_t qs = 0; qs < kStreams; ++qs) {
        for (int32_t qy = 0; qy < kPositions; ++qy) {
          for (int32_t es = 0; es < kStreams; ++es) {
            for (int32_t ey = 0; ey < kPositions; ++ey) {
              const bool want =
                  cpu::EntryVisible(seq, {qs, qy}, {es, ey}, window);
              const bool got =
                  EntryVisible({qs, qy}, {es, ey}, visible.data(), n, window);
              ASSERT_EQ(got, want)
                  << "query (" << qs << ", " << qy << ") entry (" << es << ", "
                  << ey << ") visible mask " << mask << " window " << window;
              ASSERT_EQ(EntryVisibleListed({qs, qy}, {es, ey},
                                           StreamListed(es, visible.data(), n),
                                           window),
                        want);
              visible_pairs += want;
              ++cases;
            }
          }
        }
      }
    }
  }
  // Both outcomes occur often: the grid exercises the rule, not one branch.
  EXPECT_GT(visible_pairs, cases / 10);
  EXPECT_LT(visible_pairs, cases / 2);
}

// The rule's statements, spelled out (MULTISTREAM.md).
TEST(AttentionRuleTest, SpelledOutCases) {
  const int32_t other[] = {1};
  // Own stream: causal, the query's own position included.
  EXPECT_TRUE(EntryVisible({0, 5}, {0, 5}, nullptr, 0, 0));
  EXPECT_TRUE(EntryVisible({0, 5}, {0, 0}, nullptr, 0, 0));
  EXPECT_FALSE(EntryVisible({0, 5}, {0, 6}, nullptr, 0, 0));
  // Another stream: only when listed, and strictly earlier.
  EXPECT_FALSE(EntryVisible({0, 5}, {1, 4}, nullptr, 0, 0));
  EXPECT_TRUE(EntryVisible({0, 5}, {1, 4}, other, 1, 0));
  EXPECT_FALSE(EntryVisible({0, 5}, {1, 5}, other, 1, 0));
  EXPECT_FALSE(EntryVisible({0, 5}, {2, 4}, other, 1, 0));
  // A window of 3 keeps y - y' < 3; the query always sees itself.
  EXPECT_TRUE(EntryVisible({0, 5}, {0, 3}, nullptr, 0, 3));
  EXPECT_FALSE(EntryVisible({0, 5}, {0, 2}, nullptr, 0, 3));
  EXPECT_FALSE(EntryVisible({0, 5}, {1, 2}, other, 1, 3));
  EXPECT_TRUE(EntryVisible({0, 5}, {0, 5}, nullptr, 0, 1));
  EXPECT_FALSE(EntryVisible({0, 5}, {0, 4}, nullptr, 0, 1));
}

}  // namespace
}  // namespace braid::kernels::cuda
