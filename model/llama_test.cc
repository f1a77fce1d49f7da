#include "model/llama.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"

namespace braid::model {
namespace {

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

  KvCache kv_batch = model->NewKvCache(32);
  std::vector<float> batch;
  ASSERT_TRUE(model->Forward(prompt, kv_batch, true, &batch).ok());
  ASSERT_EQ(batch.size(), prompt.size() * n_vocab);
  EXPECT_EQ(kv_batch.size(), static_cast<int>(prompt.size()));
  for (float v : batch) ASSERT_TRUE(std::isfinite(v));

  KvCache kv_step = model->NewKvCache(32);
  std::vector<float> step;
  for (size_t t = 0; t < prompt.size(); ++t) {
    ASSERT_TRUE(model->Forward({&prompt[t], 1}, kv_step, false, &step).ok());
    ASSERT_EQ(step.size(), static_cast<size_t>(n_vocab));
    EXPECT_LT(RelativeDiff(step.data(), &batch[t * n_vocab], n_vocab), 1e-4)
        << "position " << t;
  }
  // Last-only logits of a batch equal the last row of all-logits.
  KvCache kv_last = model->NewKvCache(32);
  std::vector<float> last;
  ASSERT_TRUE(model->Forward(prompt, kv_last, false, &last).ok());
  EXPECT_LT(
      RelativeDiff(last.data(), &batch[(prompt.size() - 1) * n_vocab], n_vocab),
      1e-6);
  // Logits depend on context: position 8 and 7 share a token but differ.
  EXPECT_GT(RelativeDiff(&batch[7 * n_vocab], &batch[8 * n_vocab], n_vocab),
            1e-3);
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, RandomModelTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ8_0, GgmlType::kF16));

TEST(LlamaModelTest, TruncateThenRecomputeGivesSameLogits) {
  auto model = LoadRandom({});
  ASSERT_NE(model, nullptr);
  KvCache kv = model->NewKvCache(16);
  std::vector<float> a, b;
  ASSERT_TRUE(model->Forward({3, 4, 5, 6}, kv, false, &a).ok());
  kv.Truncate(2);
  ASSERT_TRUE(model->Forward({5, 6}, kv, false, &b).ok());
  EXPECT_EQ(a, b);
}

TEST(LlamaModelTest, RejectsBadInput) {
  auto model = LoadRandom({}, 1);
  ASSERT_NE(model, nullptr);
  KvCache kv = model->NewKvCache(4);
  std::vector<float> logits;
  EXPECT_EQ(model->Forward({}, kv, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward({96}, kv, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward({-1}, kv, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Forward({1, 2, 3, 4, 5}, kv, false, &logits).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.size(), 0);
  KvCache wrong(1, 4, 32);
  EXPECT_EQ(model->Forward({1}, wrong, false, &logits).code(),
            absl::StatusCode::kInvalidArgument);
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

}  // namespace
}  // namespace braid::model
