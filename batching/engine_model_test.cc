// The engine on the real model ($BRAID_MODEL) through ModelExecutor:
// batching, preemption and prefix reuse must not change a single token.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "batching/testing/engine_runs.h"
#include "batching/testing/fifo_queue.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/smollm2.h"

namespace braid::batching {
namespace {

constexpr int kBlockSize = 16;

class EngineModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = model::testing::LoadSmolLm2();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->tokenizer.release();
    model_ = loaded->model.release();
  }

  void SetUp() override { ASSERT_NE(model_, nullptr); }

  // An engine over a pool of `num_blocks` blocks.
  struct Rig {
    std::unique_ptr<ModelExecutor> executor;
    std::unique_ptr<Engine> engine;
  };
  static Rig MakeRig(int num_blocks, int max_num_seqs = 16) {
    EngineOptions o;
    o.scheduler.num_blocks = num_blocks;
    o.scheduler.block_size = kBlockSize;
    o.scheduler.max_batch_tokens = 256;
    o.scheduler.max_num_seqs = max_num_seqs;
    o.max_context_tokens = 2048;
    Rig rig;
    rig.executor =
        std::make_unique<ModelExecutor>(model_, kBlockSize, num_blocks);
    rig.engine = std::make_unique<Engine>(rig.executor.get(), tokenizer_, o,
                                          testing::FifoQueues());
    return rig;
  }

  static GenerationRequest Greedy(const std::string& text, int max_tokens) {
    GenerationRequest r;
    r.prompt = tokenizer_->Encode(text, false, true);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.arrival = absl::Now();
    return r;
  }

  static std::vector<std::vector<int32_t>> RunTogether(
      Engine& engine, const std::vector<GenerationRequest>& requests) {
    return testing::RunTogether(engine, requests);
  }

  static void ExpectIdle(const Engine& engine) {
    testing::ExpectEngineIdle(engine);
  }

  static std::vector<GenerationRequest> Prompts(int n, int max_tokens) {
    std::vector<GenerationRequest> r;
    for (int i = 0; i < n; ++i) {
      r.push_back(Greedy(absl::StrCat("Story ", i, ": once upon a time, in a ",
                                      std::string(i % 5 + 1, 'x'),
                                      " land far away, there lived"),
                         max_tokens));
    }
    return r;
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaModel* model_ = nullptr;
};

TEST_F(EngineModelTest, SixteenConcurrentGreedyRequestsEqualEachAlone) {
  const std::vector<GenerationRequest> requests = Prompts(16, 12);
  std::vector<std::vector<int32_t>> alone;
  {
    Rig rig = MakeRig(256);
    for (const GenerationRequest& r : requests) {
      alone.push_back(RunTogether(*rig.engine, {r})[0]);
    }
  }
  Rig rig = MakeRig(256);
  std::vector<std::vector<int32_t>> together =
      RunTogether(*rig.engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
  }
  EXPECT_EQ(rig.engine->Stats().preemptions, 0);
  ExpectIdle(*rig.engine);
}

TEST_F(EngineModelTest, PreemptionUnderASmallPoolKeepsEveryOutput) {
  const std::vector<GenerationRequest> requests = Prompts(8, 40);
  Rig big = MakeRig(256);
  std::vector<std::vector<int32_t>> expected =
      RunTogether(*big.engine, requests);
  EXPECT_EQ(big.engine->Stats().preemptions, 0);
  // 8 requests of ~55 tokens (4 blocks each) in a pool of 10 blocks.
  Rig small = MakeRig(10);
  std::vector<std::vector<int32_t>> got = RunTogether(*small.engine, requests);
  const EngineStats stats = small.engine->Stats();
  std::printf("preemptions with a 10-block pool: %lld\n",
              static_cast<long long>(stats.preemptions));
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << "request " << i;
  }
  ExpectIdle(*small.engine);
}

TEST_F(EngineModelTest, SecondRequestComputesOnlyItsSuffix) {
  std::string text;
  while (tokenizer_->Encode(text, false, true).size() < 1000) {
    absl::StrAppend(&text, "The quick brown fox jumps over the lazy dog. ");
  }
  std::vector<int32_t> prefix = tokenizer_->Encode(text, false, true);
  prefix.resize(1000);
  Rig rig = MakeRig(256);
  GenerationRequest first;
  first.prompt = prefix;
  first.prompt.insert(first.prompt.end(), {100, 200, 300});
  first.max_tokens = 1;
  first.arrival = absl::Now();
  RunTogether(*rig.engine, {first});
  const int64_t computed_before = rig.engine->Stats().computed_tokens;
  EXPECT_EQ(computed_before, 1003);

  GenerationRequest second = first;
  second.prompt.resize(1000);
  second.prompt.insert(second.prompt.end(), {400, 500, 600, 700});
  RunTogether(*rig.engine, {second});
  const EngineStats stats = rig.engine->Stats();
  // 62 full blocks (992 tokens) of the shared 1,000 come from the cache;
  // the 8 tokens of the last partial block and the 4-token suffix are
  // computed.
  EXPECT_EQ(stats.prefix_hit_tokens, 992);
  EXPECT_EQ(stats.computed_tokens - computed_before, 1004 - 992);
  ExpectIdle(*rig.engine);
}

}  // namespace
}  // namespace braid::batching
