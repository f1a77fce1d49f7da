#include "server/stats.h"

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

}  // namespace
}  // namespace braid::server
