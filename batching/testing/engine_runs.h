// Running requests through an Engine in tests: submit a set together and
// collect each one's tokens, and check the engine is idle afterwards (no
// request left, every KV block free).
#ifndef BRAID_BATCHING_TESTING_ENGINE_RUNS_H_
#define BRAID_BATCHING_TESTING_ENGINE_RUNS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "batching/engine.h"
#include "batching/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace braid::batching::testing {

// Submits every request before the engine can finish any, waits for each
// to end with `reason`, and returns each one's tokens in order.
inline std::vector<std::vector<int32_t>> RunTogether(
    Engine& engine, const std::vector<GenerationRequest>& requests,
    FinishReason reason = FinishReason::kLength,
    absl::Duration timeout = absl::Seconds(300)) {
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const GenerationRequest& r : requests) {
    sinks.push_back(std::make_shared<RecordingSink>());
    EXPECT_TRUE(engine.Submit(r, sinks.back()).ok());
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : sinks) {
    EXPECT_EQ(s->WaitFinal(timeout).finish_reason, reason);
    out.push_back(s->Tokens());
  }
  return out;
}

// No request waiting or running and every KV block free.
inline void ExpectEngineIdle(const Engine& engine) {
  const EngineStats s = engine.Stats();
  EXPECT_EQ(s.requests, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.waiting_tokens, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_ENGINE_RUNS_H_
