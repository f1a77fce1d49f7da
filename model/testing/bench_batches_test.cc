// The benchmark batches are valid steps of the model seam (the CPU model,
// which checks every batch, runs them) and prefill what they say: a prompt
// packed into small steps leaves the context that one step leaves.
#include "model/testing/bench_batches.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"

namespace braid::model::testing {
namespace {

constexpr int kSeqs = 3;
constexpr int kPrompt = 37;

class BenchBatchesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = GgufFile::FromBytes(MakeRandomLlamaGguf(RandomLlamaSpec()));
    ASSERT_TRUE(file.ok());
    LoadOptions opts;
    opts.num_threads = 1;
    auto model = LlamaModel::Load(*std::move(file), opts);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    layout_ = BenchLayout::For(16, kPrompt + 4, model_->info().n_vocab);
  }

  // Prefills kSeqs sequences in steps of max_tokens into a new cache, then
  // decodes 4 steps; returns the last step's logits.
  std::vector<float> PrefillAndDecode(int max_tokens) {
    auto kv = model_->NewKvCache(16, layout_.NumBlocks(kSeqs));
    std::vector<float> logits;
    int rows = 0;
    for (const Batch& b : PrefillBatches(layout_, kSeqs, kPrompt, max_tokens)) {
      EXPECT_LE(b.tokens.size(), max_tokens);
      EXPECT_TRUE(model_->Forward(b, *kv, &logits).ok());
      rows += logits.size() / model_->info().n_vocab;
    }
    EXPECT_EQ(rows, kSeqs);
    Batch d = DecodeBatch(kSeqs);
    for (int pos = kPrompt; pos < kPrompt + 4; ++pos) {
      SetDecodePosition(layout_, pos, d);
      EXPECT_TRUE(model_->Forward(d, *kv, &logits).ok());
    }
    EXPECT_EQ(logits.size(), kSeqs * model_->info().n_vocab);
    return logits;
  }

  std::unique_ptr<LlamaModel> model_;
  BenchLayout layout_;
};

TEST_F(BenchBatchesTest, PackedPrefillSpansSteps) {
  const std::vector<Batch> steps = PrefillBatches(layout_, kSeqs, kPrompt, 16);
  ASSERT_EQ(steps.size(), 7u);  // ceil(3 * 37 / 16)
  // Step 2 ends sequence 0 (tokens 32..36) and starts sequence 1 (0..10).
  ASSERT_EQ(steps[2].sequences.size(), 2u);
  EXPECT_EQ(steps[2].sequences[0].num_cached, 32);
  EXPECT_EQ(steps[2].sequences[0].num_tokens, 5);
  EXPECT_EQ(steps[2].sequences[0].logits, BatchSequence::Logits::kLast);
  EXPECT_EQ(steps[2].sequences[1].first_token, 5);
  EXPECT_EQ(steps[2].sequences[1].num_cached, 0);
  EXPECT_EQ(steps[2].sequences[1].logits, BatchSequence::Logits::kNone);
  EXPECT_EQ(steps[2].sequences[1].block_table, std::vector<int32_t>{3});
  EXPECT_EQ(steps[2].meta[5].y, 0);
}

TEST_F(BenchBatchesTest, SmallStepsLeaveTheContextOfOneStep) {
  const std::vector<float> packed = PrefillAndDecode(16);
  const std::vector<float> whole = PrefillAndDecode(1000);
  ASSERT_EQ(packed.size(), whole.size());
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < whole.size(); ++i) {
    err += (packed[i] - whole[i]) * double(packed[i] - whole[i]);
    ref += double(whole[i]) * whole[i];
  }
  EXPECT_LE(err / ref, 1e-8);
}

}  // namespace
}  // namespace braid::model::testing
