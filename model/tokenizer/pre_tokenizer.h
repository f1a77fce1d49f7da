// PreTokenizer: splits text into "words" before byte-level BPE, using the
// regex list llama.cpp associates with a `tokenizer.ggml.pre` name.
//
// The regexes are applied in sequence: each one splits every piece produced
// by the previous one, and the text between matches is kept as pieces too
// (llama.cpp's unicode_regex_split). A regex only sees its own piece, so
// look-aheads stop at piece boundaries.
//
// Input need not be valid UTF-8: for matching, each invalid byte stands in as
// U+FFFD (as in llama.cpp), but the returned pieces are views of the original
// bytes, so no input byte is lost.
//
// Ownership: owns the compiled PCRE2 patterns. Thread-safety: immutable after
// Create; Split is const and allocates its match data per call, so one
// instance may be shared by any number of threads.

#ifndef BRAID_MODEL_TOKENIZER_PRE_TOKENIZER_H_
#define BRAID_MODEL_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace braid::model {

class PreTokenizer {
 public:
  // `name` is the GGUF `tokenizer.ggml.pre` value ("smollm", "gpt2",
  // "llama3", "qwen2", "default", ...). Unknown names are InvalidArgument.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(
      std::string_view name);

  // Builds from explicit PCRE2 patterns (compiled with UTF and UCP).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromPatterns(
      const std::vector<std::string>& patterns);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Returns the pieces of `text`, in order, as views into `text`. Their
  // concatenation is `text`; no piece is empty.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  struct Regex;
  explicit PreTokenizer(std::vector<std::unique_ptr<Regex>> regexes);

  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_PRE_TOKENIZER_H_
