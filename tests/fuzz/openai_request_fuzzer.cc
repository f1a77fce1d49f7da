// libFuzzer target: arbitrary bytes as an OpenAI request body, for both
// endpoints. ParseRequest must return a value or an INVALID_ARGUMENT naming
// a field, never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "openai/api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  for (braid::openai::Endpoint e :
       {braid::openai::Endpoint::kCompletions,
        braid::openai::Endpoint::kChatCompletions}) {
    absl::StatusOr<braid::openai::ApiRequest> r =
        braid::openai::ParseRequest(e, body);
    if (!r.ok() && r.status().code() != absl::StatusCode::kInvalidArgument) {
      std::abort();  // every refusal is INVALID_ARGUMENT
    }
    if (r.ok() &&
        (r->n < 1 || r->n > braid::openai::kMaxChoices || r->prompts.empty())) {
      std::abort();
    }
  }
  return 0;
}
