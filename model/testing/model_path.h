// Where tests find the real SmolLM2-135M-Instruct Q4_1 GGUF: $BRAID_MODEL_PATH,
// else the default download location. Tests that need it fail (not skip) when
// absent.
#ifndef BRAID_MODEL_TESTING_MODEL_PATH_H_
#define BRAID_MODEL_TESTING_MODEL_PATH_H_

#include <cstdlib>
#include <string>

namespace braid::model::testing {

inline std::string SmolLm2Path() {
  const char* env = std::getenv("BRAID_MODEL_PATH");
  if (env != nullptr && *env != '\0') return env;
  return "/root/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_MODEL_PATH_H_
