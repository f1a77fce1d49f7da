#include "server/engine_config.h"

#include "batching/testing/tokenizer.h"
#include "gtest/gtest.h"

namespace braid::server {
namespace {

// A model of 30 layers of 192-wide K/V in fp16, and each entry's (stream,
// y) (model::PagedKvPool's layout).
int64_t KvBytes(int block_size) {
  return (int64_t{2} * 30 * 192 * 2 + 8) * block_size;
}

TEST(EngineConfigTest, SizesThePoolFromTheBudget) {
  EngineFlags f;
  f.kv_budget_tokens = 1000;
  f.context_length = 512;
  auto o = MakeEngineOptions(f, KvBytes, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.num_blocks, 63);  // ceil(1000 / 16)
  f.kv_budget_tokens = 0;
  f.kv_budget_mb = 64;
  o = MakeEngineOptions(f, KvBytes, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  // 30 layers x (K + V) x 192 x 2 bytes = 23,040 bytes per token.
  EXPECT_NEAR(o->scheduler.num_blocks * 16, (64 << 20) / 23040, 64);
}

TEST(EngineConfigTest, NamesTheFlagAtFault) {
  EngineFlags f;
  f.kv_budget_tokens = 100;
  f.context_length = 512;
  auto o = MakeEngineOptions(f, KvBytes, nullptr);
  EXPECT_NE(o.status().message().find("--kv_budget"), std::string::npos);
  f.kv_budget_tokens = 1024;
  f.queue_shares = {0.9, 0.9, 0.0};
  o = MakeEngineOptions(f, KvBytes, nullptr);
  EXPECT_NE(o.status().message().find("--io_share"), std::string::npos);
}

TEST(EngineConfigTest, SessionFlags) {
  EngineFlags f;
  f.kv_budget_tokens = 1024;
  f.context_length = 512;
  f.session_idle_timeout_s = 7;
  f.max_sessions_per_client = 3;
  f.max_kept_sessions = 5;
  auto o = MakeEngineOptions(f, KvBytes, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->session_idle_timeout, absl::Seconds(7));
  EXPECT_EQ(o->max_sessions_per_client, 3);
  EXPECT_EQ(o->max_kept_sessions, 5);
  f.session_idle_timeout_s = 0;  // never
  o = MakeEngineOptions(f, KvBytes, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->session_idle_timeout, absl::InfiniteDuration());
  f.max_kept_sessions = -1;
  o = MakeEngineOptions(f, KvBytes, nullptr);
  EXPECT_NE(o.status().message().find("--max_kept_sessions"),
            std::string::npos);
}

TEST(EngineConfigTest, ThinkingMarkersMustBeOneToken) {
  auto tokenizer = batching::testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EngineFlags f;
  f.kv_budget_tokens = 4096;
  f.think_start = "<|im_start|>";  // one special token in SmolLM2
  f.think_end = "<|im_end|>";
  auto o = MakeEngineOptions(f, KvBytes, tokenizer.get());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_GE(o->reasoning.think_start_id, 0);
  EXPECT_NE(o->reasoning.think_start_id, o->reasoning.think_end_id);
  f.think_end = "the end of thinking";
  o = MakeEngineOptions(f, KvBytes, tokenizer.get());
  EXPECT_NE(o.status().message().find("--think_end"), std::string::npos);
}

}  // namespace
}  // namespace braid::server
