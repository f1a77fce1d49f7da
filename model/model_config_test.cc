#include "model/model_config.h"

#include <string>
#include <tuple>
#include <vector>

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

// A random llama model's bytes with general.architecture and every
// "llama."-prefixed key renamed to `arch` (5 letters, the same length).
std::string AsArch(const std::string& arch) {
  std::string bytes = testing::MakeRandomLlamaGguf({});
  for (size_t pos = 0; (pos = bytes.find("llama", pos)) != std::string::npos;
       pos += 5) {
    bytes.replace(pos, 5, arch);
  }
  return bytes;
}

TEST(LlamaConfigTest, ArchitecturesCarryTheirTraits) {
  for (const auto& [arch, rope, bias, norm] :
       {std::tuple{"qwen2", ArchTraits::Rope::kNeox, true, false},
        std::tuple{"qwen3", ArchTraits::Rope::kNeox, false, true}}) {
    auto file = GgufFile::FromBytes(AsArch(arch));
    ASSERT_TRUE(file.ok()) << file.status();
    auto c = LlamaConfig::FromGguf(**file);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->arch, arch);
    EXPECT_EQ(c->traits.rope, rope) << arch;
    EXPECT_EQ(c->traits.qkv_bias, bias) << arch;
    EXPECT_EQ(c->traits.qk_norm, norm) << arch;
  }
  testing::GgufWriter w;
  w.AddString("general.architecture", "gemma3");
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok());
  const std::string message(LlamaConfig::FromGguf(**file).status().message());
  EXPECT_THAT(message, HasSubstr("gemma3"));
  EXPECT_THAT(message, HasSubstr(SupportedArchs()));
}

// The keys of a small valid llama config, plus `extra`.
std::string ConfigWith(void (*extra)(testing::GgufWriter&)) {
  testing::RandomLlamaSpec spec;
  testing::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 128);
  w.AddUint32("llama.embedding_length", 64);
  w.AddUint32("llama.block_count", 1);
  w.AddUint32("llama.feed_forward_length", 64);
  w.AddUint32("llama.attention.head_count", 4);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  extra(w);
  w.AddTensorFromFloats("token_embd.weight", GgmlType::kF32, {64, 2},
                        std::vector<float>(128, 0.0f));
  return w.Serialize();
}

TEST(LlamaConfigTest, RopeScaling) {
  auto config = [](void (*extra)(testing::GgufWriter&)) {
    auto file = GgufFile::FromBytes(ConfigWith(extra));
    EXPECT_TRUE(file.ok()) << file.status();
    return LlamaConfig::FromGguf(**file);
  };
  auto linear = config([](testing::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "linear");
    w.AddFloat32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_FLOAT_EQ(linear->rope_freq_scale, 0.25f);
  auto no_factor = config([](testing::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "linear");
  });
  EXPECT_EQ(no_factor.status().code(), absl::StatusCode::kInvalidArgument);
  auto yarn = config([](testing::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
  });
  EXPECT_EQ(yarn.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(yarn.status().message(), HasSubstr("'yarn'"));
  // A head size of its own (qwen3's key_length).
  auto heads = config([](testing::GgufWriter& w) {
    w.AddUint32("llama.attention.key_length", 32);
    w.AddUint32("llama.attention.value_length", 32);
  });
  ASSERT_TRUE(heads.ok()) << heads.status();
  EXPECT_EQ(heads->head_dim, 32);
  EXPECT_EQ(heads->n_rot, 32);
}

}  // namespace
}  // namespace braid::model
