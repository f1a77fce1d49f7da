#include "model/model_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/gguf_writer.h"
#include "model/testing/random_llama.h"

namespace braid::model {
namespace {

using ::testing::HasSubstr;

TEST(LlamaConfigTest, ReadsRandomModel) {
  testing::RandomLlamaSpec spec;
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  ASSERT_TRUE(file.ok()) << file.status();
  auto c = LlamaConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_vocab, spec.n_vocab);
  EXPECT_EQ(c->n_layer, spec.n_layer);
  EXPECT_EQ(c->head_dim, spec.n_embd / spec.n_head);
  EXPECT_EQ(c->n_rot, c->head_dim);
  EXPECT_EQ(c->kv_dim(), spec.n_head_kv * c->head_dim);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
}

TEST(LlamaConfigTest, RejectsOtherArchitecture) {
  testing::GgufWriter w;
  w.AddString("general.architecture", "gpt2");
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok());
  EXPECT_THAT(LlamaConfig::FromGguf(**file).status().message(),
              HasSubstr("gpt2"));
}

TEST(LlamaConfigTest, NamesMissingKey) {
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 128);
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok());
  EXPECT_THAT(LlamaConfig::FromGguf(**file).status().message(),
              HasSubstr("llama.embedding_length"));
}

TEST(LlamaConfigTest, RejectsIndivisibleHeads) {
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 128);
  w.AddUint32("llama.embedding_length", 64);
  w.AddUint32("llama.block_count", 1);
  w.AddUint32("llama.feed_forward_length", 64);
  w.AddUint32("llama.attention.head_count", 4);
  w.AddUint32("llama.attention.head_count_kv", 3);
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok());
  EXPECT_THAT(LlamaConfig::FromGguf(**file).status().message(),
              HasSubstr("n_head_kv"));
}

}  // namespace
}  // namespace braid::model
