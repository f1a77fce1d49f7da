// TokenizerOnly keeps the general.* and tokenizer.* keys and nothing else.
#include "model/testing/convert_gguf.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/gguf_writer.h"
#include "model/testing/random_llama.h"

namespace braid::model::testing {
namespace {

TEST(TokenizerOnlyTest, KeepsTheTokenizerAndGeneralKeysOnly) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", "model");
  w.AddUint32("llama.block_count", 2);
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 3});
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddTensorFromFloats("token_embd.weight", GgmlType::kF32, {2, 3},
                        std::vector<float>(6, 1.0f));
  auto model = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(model.ok()) << model.status();

  auto image = TokenizerOnly(**model);
  ASSERT_TRUE(image.ok()) << image.status();
  auto tok = GgufFile::FromBytes(*image);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(
      (*tok)->keys(),
      (std::vector<std::string>{
          "general.architecture", "general.name", "tokenizer.ggml.model",
          "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
          "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"}));
  EXPECT_TRUE((*tok)->tensors().empty());
  EXPECT_EQ(TokenizerVocabSize(**tok), 3);
  EXPECT_EQ(*(*tok)->GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*(*tok)->GetIntArray("tokenizer.ggml.token_type"),
            (std::vector<int64_t>{1, 1, 3}));
  EXPECT_FALSE(*(*tok)->GetBool("tokenizer.ggml.add_bos_token"));
}

}  // namespace
}  // namespace braid::model::testing
