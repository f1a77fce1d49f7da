#include "model/cpu/llama.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"
#include "model/testing/sequence_runner.h"

namespace braid::model {
namespace {

using testing::SequenceRunner;

std::unique_ptr<LlamaModel> LoadRandom(const testing::RandomLlamaSpec& spec,
                                       int threads = 2) {
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  EXPECT_TRUE(file.ok()) << file.status();
  auto model = LlamaModel::Load(*std::move(file), LoadOptions{threads});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// Max |a-b| / max(|b|) over the vectors.
double RelativeDiff(const float* a, const float* b, size_t n) {
  double max_diff = 0, max_ref = 1e-12;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
    max_ref = std::max(max_ref, std::fabs(double{b[i]}));
  }
  return max_diff / max_ref;
}

class RandomModelTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(RandomModelTest, BatchedPrefillMatchesTokenByToken) {
  testing::RandomLlamaSpec spec;
  spec.matrix_type = GetParam();
  spec.tied_embeddings = GetParam() != GgmlType::kF16;
  auto model = LoadRandom(spec);
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  const std::vector<int32_t> prompt = {1, 5, 9, 33, 2, 95, 60, 7, 7, 40};

  SequenceRunner kv_batch(*model, 32);
  std::vector<float> batch;
  ASSERT_TRUE(kv_batch.Forward(prompt, true, &batch).ok());
  ASSERT_EQ(batch.size(), prompt.size() * n_vocab);
  EXPECT_EQ(kv_batch.size(), static_cast<int>(prompt.size()));
  for (float v : batch) ASSERT_TRUE(std::isfinite(v));

  SequenceRunner kv_step(*model, 32);
  std::vector<float> step;
  for (size_t t = 0; t < prompt.size(); ++t) {
    ASSERT_TRUE(kv_step.Forward({&prompt[t], 1}, false, &step).ok());
    ASSERT_EQ(step.size(), static_cast<size_t>(n_vocab));
    EXPECT_LT(RelativeDiff(step.data(), &batch[t * n_vocab], n_vocab), 1e-4)
        << "position " << t;
  }
  // Last-only logits of a batch equal the last row of all-logits.
  SequenceRunner kv_last(*model, 32);
  std::vector<float> last;
  ASSERT_TRUE(kv_last.Forward(prompt, false, &last).ok());
  EXPECT_LT(
      RelativeDiff(last.data(), &batch[(prompt.size() - 1) * n_vocab], n_vocab),
      1e-6);
  // Logits depend on context: position 8 and 7 share a token but differ.
  EXPECT_GT(RelativeDiff(&batch[7 * n_vocab], &batch[8 * n_vocab], n_vocab),
            1e-3);
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, RandomModelTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ8_0, GgmlType::kF16,
                                           GgmlType::kBF16, GgmlType::kF32,
                                           GgmlType::kQ5_0, GgmlType::kQ5_1,
                                           GgmlType::kIQ4_NL));

// The K-quants need rows of whole 256-element super-blocks.
class KQuantModelTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(KQuantModelTest, BatchedPrefillMatchesTokenByToken) {
  testing::RandomLlamaSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 512;
  spec.matrix_type = GetParam();
  spec.embedding_type = GetParam();
  auto model = LoadRandom(spec);
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  const std::vector<int32_t> prompt = {1,  5,  9,  33, 2,  95, 60, 7,  7,
                                       40, 11, 12, 13, 14, 15, 16, 17, 18};
  SequenceRunner kv_batch(*model, 32);
  std::vector<float> batch;
  ASSERT_TRUE(kv_batch.Forward(prompt, true, &batch).ok());
  for (float v : batch) ASSERT_TRUE(std::isfinite(v));
  SequenceRunner kv_step(*model, 32);
  std::vector<float> step;
  for (size_t t = 0; t < prompt.size(); ++t) {
    ASSERT_TRUE(kv_step.Forward({&prompt[t], 1}, false, &step).ok());
    // Batched attention sums in another order
    // (kernels/cpu/attention/attention.h); a last-bit difference can move one
    // of a Q8_K block's 256 activation quants by a step (1/127 of the block's
    // largest), so the bound is looser than RandomModelTest's.
    EXPECT_LT(RelativeDiff(step.data(), &batch[t * n_vocab], n_vocab), 1e-2)
        << "position " << t;
  }
  EXPECT_GT(RelativeDiff(&batch[7 * n_vocab], &batch[8 * n_vocab], n_vocab),
            2e-2);
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, KQuantModelTest,
                         ::testing::Values(GgmlType::kQ2_K, GgmlType::kQ3_K,
                                           GgmlType::kQ4_K, GgmlType::kQ5_K,
                                           GgmlType::kQ6_K));

TEST(LlamaModelTest, TruncateThenRecomputeGivesSameLogits) {
  auto model = LoadRandom({});
  ASSERT_NE(model, nullptr);
  SequenceRunner kv(*model, 16, /*block_size=*/4);
  std::vector<float> a, b;
  ASSERT_TRUE(kv.Forward({3, 4, 5, 6}, false, &a).ok());
  kv.Truncate(2);
  ASSERT_TRUE(kv.Forward({5, 6}, false, &b).ok());
  EXPECT_EQ(a, b);
}

TEST(LlamaModelTest, RejectsBadInput) {
  auto model = LoadRandom({}, 1);
  ASSERT_NE(model, nullptr);
  SequenceRunner kv(*model, 4, /*block_size=*/4);
  std::vector<float> logits;
  EXPECT_EQ(kv.Forward({}, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Forward({96}, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Forward({-1}, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Forward({1, 2, 3, 4, 5}, false, &logits).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.size(), 0);
  // A pool shaped for another model: llama_paged_test.
}

TEST(LlamaModelTest, LoadRejectsMissingTensor) {
  testing::RandomLlamaSpec spec;
  std::string bytes = testing::MakeRandomLlamaGguf(spec);
  // Rename one tensor so it is missing under its real name.
  const size_t pos = bytes.find("blk.1.ffn_up.weight");
  ASSERT_NE(pos, std::string::npos);
  bytes[pos + 6] = 'X';
  auto file = GgufFile::FromBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  auto model = LlamaModel::Load(*std::move(file), {});
  EXPECT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("blk.1.ffn_up.weight"),
            std::string::npos)
      << model.status();
}

// An architecture's own tensors are required: a qwen2 file without its
// Q/K/V biases (the random llama model renamed) is refused naming the first.
TEST(LlamaModelTest, LoadRejectsMissingArchitectureTensor) {
  std::string bytes = testing::MakeRandomLlamaGguf({});
  for (size_t pos = 0; (pos = bytes.find("llama", pos)) != std::string::npos;
       pos += 5) {
    bytes.replace(pos, 5, "qwen2");
  }
  auto file = GgufFile::FromBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  auto model = LlamaModel::Load(*std::move(file), {});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("blk.0.attn_q.bias"),
            std::string::npos)
      << model.status();
}

// The load log's parts: the types with counts, and tensors the pass does not
// read (none for a complete file).
TEST(LlamaModelTest, DescribesTypesAndUnusedTensors) {
  testing::RandomLlamaSpec spec;
  auto model = LoadRandom(spec);
  ASSERT_NE(model, nullptr);
  // 2 layers: 7 Q4_1 matrices each; 2 norms each and the output norm in F32;
  // the tied embeddings in Q8_0.
  EXPECT_EQ(model->DescribeTensorTypes(), "Q4_1 x14, F32 x5, Q8_0 x1");
  EXPECT_TRUE(model->UnusedTensors().empty());
}

}  // namespace
}  // namespace braid::model
