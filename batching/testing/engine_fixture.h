// The fixture of the engine tests with a fake executor (engine_test,
// engine_session_test): the SmolLM2 tokenizer ($BRAID_MODEL, no weights),
// small engine options, prompts, engines over a FakeExecutor, the idle
// check, and helpers for one-output sessions and scripted logits.
#ifndef BRAID_BATCHING_TESTING_ENGINE_FIXTURE_H_
#define BRAID_BATCHING_TESTING_ENGINE_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "batching/engine.h"
#include "batching/testing/engine_runs.h"
#include "batching/testing/fake_executor.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/tokenizer.h"
#include "gtest/gtest.h"
#include "metrics/engine_metrics.h"

namespace braid::batching::testing {

class FakeEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = LoadTestTokenizer().release(); }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(tokenizer_, nullptr); }

  static EngineOptions Options(int num_blocks = 256) {
    EngineOptions o;
    o.scheduler.num_blocks = num_blocks;
    o.scheduler.block_size = 4;
    o.scheduler.max_batch_tokens = 16;
    o.scheduler.max_num_seqs = 8;
    return o;
  }

  // Prompt of `n` tokens starting at `first`.
  static GenerationRequest Request(int n, int max_tokens, int32_t first = 1000,
                                   int priority = 0) {
    GenerationRequest r;
    for (int i = 0; i < n; ++i) r.prompt.push_back(first + i);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.priority = priority;
    r.arrival = absl::Now();
    return r;
  }

  std::unique_ptr<Engine> MakeEngine(
      FakeExecutor* executor, const EngineOptions& options,
      metrics::EngineMetrics* engine_metrics = nullptr) {
    return std::make_unique<Engine>(executor, tokenizer_, options, FifoQueues(),
                                    engine_metrics);
  }

  static void ExpectIdle(const Engine& engine) { ExpectEngineIdle(engine); }

  // The token of the byte 0xE2 alone: the first of a three-byte
  // character, so text stops before it until the character is complete.
  int32_t LeadByteToken() const {
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      if (tokenizer_->TokenBytes(id) == "\xE2") return id;
    }
    ADD_FAILURE() << "no token for byte 0xE2";
    return 0;
  }

  // A session of prefix {1000, 1001, 1002}: input stream 1 ("user") and
  // output stream 2 ("out", max_tokens a turn, ignore_eos, `sampling`:
  // greedy by default).
  static SessionOptions OneOutputSession(int max_tokens,
                                         SamplingOptions sampling = {}) {
    SessionOptions o;
    o.prefix = {1000, 1001, 1002};
    SessionStreamOptions out;
    out.name = "out";
    out.output = true;
    out.max_tokens = max_tokens;
    out.ignore_eos = true;
    out.sampling = sampling;
    o.streams = {SessionStreamOptions{.name = "user"}, out};
    return o;
  }

  // Constant logits: `ids[i]` gets `values[i]`, every other token 0.
  static FakeExecutor::Script Constant(std::vector<int32_t> ids,
                                       std::vector<float> values) {
    return
        [ids, values](const std::vector<int32_t>&, std::vector<float>* logits) {
          std::fill(logits->begin(), logits->end(), 0.0f);
          for (size_t i = 0; i < ids.size(); ++i) (*logits)[ids[i]] = values[i];
        };
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_ENGINE_FIXTURE_H_
