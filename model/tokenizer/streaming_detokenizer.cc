#include "model/tokenizer/streaming_detokenizer.h"

#include "model/tokenizer/unicode.h"

namespace braid::model {

std::string StreamingDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_.TokenBytes(id);
  const size_t complete = CompleteUtf8Prefix(pending_);
  if (complete == 0) return {};
  std::string out =
      SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace braid::model
