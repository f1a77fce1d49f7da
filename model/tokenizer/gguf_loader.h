// Reads a GGUF file's `tokenizer.ggml.*` metadata into a TokenizerData.
//
// Kept apart from //model/tokenizer:tokenizer so the tokenizer core does not
// depend on the GGUF reader. Also exposes the chat template source and the
// BOS/EOS texts a ChatTemplate needs.
//
// Thread-safety: pure functions over a const GgufFile.

#ifndef BRAID_MODEL_TOKENIZER_GGUF_LOADER_H_
#define BRAID_MODEL_TOKENIZER_GGUF_LOADER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf.h"
#include "model/tokenizer/tokenizer_data.h"

namespace braid::model {

// Required keys: tokenizer.ggml.model, tokenizer.ggml.tokens. Optional keys
// take llama.cpp's defaults (pre "default"; add_bos true for the llama3
// pre-tokenizer family, else false; add_eos false; token types all NORMAL).
// Missing or ill-typed required keys are InvalidArgument naming the key.
absl::StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& gguf);

// `tokenizer.chat_template`, or nullopt when the file has none.
absl::StatusOr<std::optional<std::string>> ChatTemplateFromGguf(
    const GgufFile& gguf);

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_GGUF_LOADER_H_
