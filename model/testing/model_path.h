// Where tests find the real SmolLM2-135M-Instruct Q4_1 GGUF: $BRAID_MODEL,
// which `make test` sets (scripts/fetch_model.sh prints the path). Tests that
// need the model fail, never skip, when it is not set.
#ifndef BRAID_MODEL_TESTING_MODEL_PATH_H_
#define BRAID_MODEL_TESTING_MODEL_PATH_H_

#include <cstdlib>
#include <string>

namespace braid::model::testing {

constexpr char kNoModelMessage[] =
    "BRAID_MODEL is not set: point it at SmolLM2-135M-Instruct.Q4_1.gguf "
    "(scripts/fetch_model.sh downloads it and prints its path; `make test` "
    "sets it)";

// The model path, or "" when BRAID_MODEL is unset.
inline std::string SmolLm2Path() {
  const char* env = std::getenv("BRAID_MODEL");
  return env != nullptr ? env : "";
}

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_MODEL_PATH_H_
