#include "server/stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace braid::server {
namespace {

TEST(StatsTest, StatsJsonHasEveryCounter) {
  batching::EngineStats s;
  s.kv_blocks_total = 7;
  s.preemptions = 3;
  s.sessions = 2;
  s.kept_sessions = 4;
  const std::string json = StatsJson(s);
  EXPECT_NE(json.find("\"kv_blocks_total\": 7"), std::string::npos);
  EXPECT_NE(json.find("\"preemptions\": 3"), std::string::npos);
  EXPECT_NE(json.find("\"requests\": 0"), std::string::npos);
  EXPECT_NE(json.find("\"sessions\": 2"), std::string::npos);
  EXPECT_NE(json.find("\"kept_sessions\": 4"), std::string::npos);
}

TEST(StatsTest, ResidentBytesGrowsWithTouchedMemory) {
  const int64_t before = ResidentBytes();
  EXPECT_GT(before, 0);
  std::vector<char> block(64 << 20, 1);  // 64 MiB, every page touched
  EXPECT_GE(ResidentBytes(), before + (48 << 20)) << block[12345];
}

}  // namespace

}  // namespace braid::server
