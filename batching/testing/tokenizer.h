// The tokenizer of the model named by $BRAID_MODEL, for engine tests that
// need EOS and detokenization but no weights. Fails the test when unset.
#ifndef BRAID_BATCHING_TESTING_TOKENIZER_H_
#define BRAID_BATCHING_TESTING_TOKENIZER_H_

#include <cstdlib>
#include <memory>

#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::batching::testing {

inline std::unique_ptr<model::Tokenizer> LoadTestTokenizer() {
  const char* path = std::getenv("BRAID_MODEL");
  EXPECT_NE(path, nullptr) << "set BRAID_MODEL (make test does)";
  if (path == nullptr) return nullptr;
  auto file = model::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto data = model::TokenizerDataFromGguf(**file);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return nullptr;
  auto tok = model::Tokenizer::Create(*std::move(data));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_TOKENIZER_H_
