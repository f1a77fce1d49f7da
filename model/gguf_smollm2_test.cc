// Loads the real SmolLM2-135M GGUF (path from BRAID_MODEL) and checks metadata
// and tensor descriptors.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/model_path.h"

namespace braid::model {
namespace {

TEST(GgufSmolLm2Test, LoadsRealModel) {
  const std::string path = testing::SmolLm2Path();
  ASSERT_FALSE(path.empty()) << testing::kNoModelMessage;
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.block_count"), 30);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_NEAR(*f.GetFloat("llama.rope.freq_base"), 100000.0, 1e-3);
  EXPECT_NEAR(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5,
              1e-9);
  EXPECT_FALSE(*f.GetBool("tokenizer.ggml.add_bos_token"));
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 49152u);
  EXPECT_EQ((*tokens)[1], "<|im_start|>");
  EXPECT_EQ(f.tensors().size(), 272u);
  const GgufTensor* emb = f.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::kQ8_0);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{576, 49152}));
  const GgufTensor* q = f.FindTensor("blk.29.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GgmlType::kQ4_1);
  EXPECT_EQ(q->size_bytes, 576u * 576 / 32 * 20);
  EXPECT_EQ(f.FindTensor("output.weight"), nullptr);  // Tied embeddings.
}

}  // namespace
}  // namespace braid::model
