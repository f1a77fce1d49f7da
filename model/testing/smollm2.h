// Loads the real default model for tests: $BRAID_MODEL (SmolLM2-135M-Instruct
// Q4_1, which `make test` sets). Tests that need it fail, never skip, when it
// is missing; the error says how to get it.
#ifndef BRAID_MODEL_TESTING_SMOLLM2_H_
#define BRAID_MODEL_TESTING_SMOLLM2_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/cpu/llama.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::model::testing {

struct LoadedModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LlamaModel> model;  // null when loaded without weights
};

// The tokenizer and, when `with_weights`, the model of $BRAID_MODEL.
absl::StatusOr<LoadedModel> LoadSmolLm2(bool with_weights = true);

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_SMOLLM2_H_
