// The tokenizer of the model named by $BRAID_MODEL, for engine tests that
// need EOS and detokenization but no weights. Fails the test when unset.
#ifndef BRAID_BATCHING_TESTING_TOKENIZER_H_
#define BRAID_BATCHING_TESTING_TOKENIZER_H_

#include <memory>

#include "gtest/gtest.h"
#include "model/testing/smollm2.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::batching::testing {

inline std::unique_ptr<model::Tokenizer> LoadTestTokenizer() {
  auto loaded = model::testing::LoadSmolLm2(/*with_weights=*/false);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(loaded->tokenizer) : nullptr;
}

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_TOKENIZER_H_
