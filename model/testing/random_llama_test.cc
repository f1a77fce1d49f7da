// NamedLlamaShape's table and the fast weight generator: deterministic
// whatever the thread count, with the asked mean and spread.
#include "model/testing/random_llama.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf.h"

namespace braid::model::testing {
namespace {

RandomLlamaSpec FastSpec(int threads) {
  RandomLlamaSpec s;
  s.matrix_type = GgmlType::kF32;
  s.embedding_type = GgmlType::kF32;
  s.fast_weights = true;
  s.threads = threads;
  return s;
}

// Mean and standard deviation of an F32 tensor's values.
void Moments(const GgufTensor& t, double* mean, double* stddev) {
  const float* v = reinterpret_cast<const float*>(t.data);
  const int64_t n = t.num_elements();
  double sum = 0.0, sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += v[i];
    sum2 += double{v[i]} * v[i];
  }
  *mean = sum / n;
  *stddev = std::sqrt(sum2 / n - *mean * *mean);
}

TEST(RandomLlamaTest, FastWeightsDoNotDependOnTheThreadCount) {
  EXPECT_EQ(MakeRandomLlamaGguf(FastSpec(1)), MakeRandomLlamaGguf(FastSpec(3)));
  RandomLlamaSpec other = FastSpec(1);
  other.seed = 2;
  EXPECT_NE(MakeRandomLlamaGguf(FastSpec(1)), MakeRandomLlamaGguf(other));
}

TEST(RandomLlamaTest, FastWeightsHaveTheSlowOnesMeanAndSpread) {
  RandomLlamaSpec spec = FastSpec(2);
  spec.n_embd = 256;
  spec.n_ff = 512;
  auto file = GgufFile::FromBytes(MakeRandomLlamaGguf(spec));
  ASSERT_TRUE(file.ok()) << file.status();
  double mean, stddev;
  Moments(*(*file)->FindTensor("blk.0.ffn_up.weight"), &mean, &stddev);
  EXPECT_NEAR(mean, 0.0, 2e-3);
  EXPECT_NEAR(stddev, 1.0 / 16, 1e-3);  // 1 / sqrt(n_embd)
  Moments(*(*file)->FindTensor("blk.1.attn_norm.weight"), &mean, &stddev);
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_NEAR(stddev, 0.1, 0.02);
  // Not the slow generator's values.
  spec.fast_weights = false;
  EXPECT_NE(MakeRandomLlamaGguf(spec), MakeRandomLlamaGguf(FastSpec(2)));
}

TEST(RandomLlamaTest, NamedShapes) {
  auto smol = NamedLlamaShape("smollm2-135m");
  ASSERT_TRUE(smol.ok());
  EXPECT_EQ(smol->n_layer, 30);
  EXPECT_EQ(smol->n_head_kv, 3);
  EXPECT_TRUE(smol->tied_embeddings);
  auto l1b = NamedLlamaShape("llama-1b");
  ASSERT_TRUE(l1b.ok());
  EXPECT_EQ(l1b->n_embd, 2048);
  EXPECT_EQ(l1b->n_layer, 16);
  EXPECT_TRUE(l1b->tied_embeddings);
  auto l8b = NamedLlamaShape("llama-8b");
  ASSERT_TRUE(l8b.ok());
  EXPECT_EQ(l8b->n_vocab, 128256);
  EXPECT_EQ(l8b->n_ff, 14336);
  EXPECT_EQ(l8b->n_layer, 32);
  EXPECT_FALSE(l8b->tied_embeddings);
  EXPECT_EQ(l8b->rope_base, 500000.0f);
  auto bad = NamedLlamaShape("llama-70b");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("llama-8b"), std::string::npos);
}

TEST(RandomLlamaTest, GgmlTypeFromName) {
  EXPECT_EQ(*GgmlTypeFromName("Q8_0"), GgmlType::kQ8_0);
  EXPECT_EQ(*GgmlTypeFromName("f16"), GgmlType::kF16);
  EXPECT_EQ(*GgmlTypeFromName("q4_k"), GgmlType::kQ4_K);
  EXPECT_EQ(GgmlTypeFromName("Q9_9").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braid::model::testing
