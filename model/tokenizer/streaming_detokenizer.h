// StreamingDetokenizer: turns a stream of generated token ids into text
// chunks that are always whole UTF-8 characters.
//
// Byte-level BPE tokens can end in the middle of a multi-byte character (an
// emoji or CJK character is often two or three tokens). Push() appends the
// token's bytes and returns the longest prefix made of complete characters,
// holding back an incomplete tail until the following tokens complete it.
// Bytes that can never become valid UTF-8 are emitted as U+FFFD, so every
// chunk is valid UTF-8 (as protobuf string fields require). For a stream
// whose Decode() is valid UTF-8, the concatenation of all Push() results and
// Flush() equals Decode().
//
// Ownership: does not own the Tokenizer, which must outlive it.
// Thread-safety: not thread-safe; one instance per generation stream.

#ifndef BRAID_MODEL_TOKENIZER_STREAMING_DETOKENIZER_H_
#define BRAID_MODEL_TOKENIZER_STREAMING_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "model/tokenizer/tokenizer.h"

namespace braid::model {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer* tokenizer)
      : tokenizer_(*tokenizer) {}

  // Adds one token; returns the newly completed text (possibly empty).
  std::string Push(int32_t id);

  // Returns whatever is held back, an incomplete tail as U+FFFD, and resets.
  std::string Flush();

  // Bytes currently held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_STREAMING_DETOKENIZER_H_
