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
  w.AddString("general.architecture", "phi3");
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok());
  const std::string message(LlamaConfig::FromGguf(**file).status().message());
  EXPECT_THAT(message, HasSubstr("phi3"));
  EXPECT_THAT(message, HasSubstr(SupportedArchs()));
  EXPECT_THAT(SupportedArchs(), HasSubstr("gemma3"));
}

// The keys of a small valid config of `arch` (n_layer layers), plus `extra`.
std::string ConfigFor(const std::string& arch, int n_layer,
                      void (*extra)(testing::GgufWriter&)) {
  testing::GgufWriter w;
  const std::string p = arch + ".";
  w.AddString("general.architecture", arch);
  w.AddUint32(p + "context_length", 128);
  w.AddUint32(p + "embedding_length", 64);
  w.AddUint32(p + "block_count", n_layer);
  w.AddUint32(p + "feed_forward_length", 64);
  w.AddUint32(p + "attention.head_count", 4);
  w.AddFloat32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  extra(w);
  w.AddTensorFromFloats("token_embd.weight", GgmlType::kF32, {64, 2},
                        std::vector<float>(128, 0.0f));
  return w.Serialize();
}
std::string ConfigWith(void (*extra)(testing::GgufWriter&)) {
  return ConfigFor("llama", 1, extra);
}

absl::StatusOr<LlamaConfig> ConfigOf(const std::string& bytes) {
  auto file = GgufFile::FromBytes(bytes);
  EXPECT_TRUE(file.ok()) << file.status();
  return LlamaConfig::FromGguf(**file);
}

TEST(LlamaConfigTest, SlidingWindowsSoftcapsAndGemmaScales) {
  auto none = [](testing::GgufWriter&) {};
  // Gemma 2: llama.cpp's defaults (window 4096 on every other layer, caps
  // 50 and 30), Q scaled by 1 / sqrt(head_dim).
  auto g2 = ConfigOf(ConfigFor("gemma2", 4, none));
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ(g2->traits.ffn, ArchTraits::Ffn::kGeluTanh);
  EXPECT_TRUE(g2->traits.gemma);
  EXPECT_EQ(g2->sliding_window, 4096);
  EXPECT_TRUE(g2->Slides(0));
  EXPECT_FALSE(g2->Slides(1));
  EXPECT_TRUE(g2->Slides(2));
  EXPECT_FLOAT_EQ(g2->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(g2->final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(g2->q_scale, 1.0f / 4.0f);  // head_dim 16
  EXPECT_FALSE(g2->SwaRopeDiffers());
  // The 27B layer count: query_pre_attn_scalar n_embd / n_head (16), not
  // the key_length (64).
  auto g2_27b = ConfigOf(ConfigFor("gemma2", 46, [](testing::GgufWriter& w) {
    w.AddUint32("gemma2.attention.key_length", 64);
    w.AddFloat32("gemma2.attn_logit_softcapping", 20.0f);
  }));
  ASSERT_TRUE(g2_27b.ok()) << g2_27b.status();
  EXPECT_FLOAT_EQ(g2_27b->q_scale, 1.0f / 4.0f);
  EXPECT_FLOAT_EQ(g2_27b->attn_softcap, 20.0f);
  // Gemma 3: the file's window on five layers in six, the sliding layers'
  // RoPE at base 10000 unscaled, no caps.
  auto g3 = ConfigOf(ConfigFor("gemma3", 12, [](testing::GgufWriter& w) {
    w.AddUint32("gemma3.attention.sliding_window", 512);
    w.AddFloat32("gemma3.rope.freq_base", 1e6f);
    w.AddString("gemma3.rope.scaling.type", "linear");
    w.AddFloat32("gemma3.rope.scaling.factor", 8.0f);
  }));
  ASSERT_TRUE(g3.ok()) << g3.status();
  EXPECT_EQ(g3->sliding_window, 512);
  for (int il = 0; il < 12; ++il) EXPECT_EQ(g3->Slides(il), il % 6 != 5) << il;
  EXPECT_TRUE(g3->SwaRopeDiffers());
  EXPECT_FLOAT_EQ(g3->swa_rope_base, 10000.0f);
  EXPECT_FLOAT_EQ(g3->swa_rope_freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(g3->rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(g3->attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(g3->final_softcap, 0.0f);
  // Mistral: a llama file's window slides every layer; none: no window.
  auto mistral = ConfigOf(ConfigWith([](testing::GgufWriter& w) {
    w.AddUint32("llama.attention.sliding_window", 4096);
  }));
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_TRUE(mistral->Slides(0));
  EXPECT_EQ(mistral->q_scale, 0.0f);
  auto plain = ConfigOf(ConfigWith(none));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->sliding_window, 0);
  EXPECT_FALSE(plain->Slides(0));
  // Qwen2 files' window keys are not read (llama.cpp does not either).
  auto qwen = ConfigOf(ConfigFor("qwen2", 1, [](testing::GgufWriter& w) {
    w.AddUint32("qwen2.attention.sliding_window", 4096);
  }));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->sliding_window, 0);
  auto bad = ConfigOf(ConfigWith([](testing::GgufWriter& w) {
    w.AddString("llama.attention.sliding_window", "wide");
  }));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("sliding_window"));
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
