// TokenizerData: the plain-value description of a vocabulary that Tokenizer is
// built from. It mirrors the `tokenizer.ggml.*` keys of a GGUF file but does
// not depend on the GGUF reader (see gguf_loader.h for that adapter), so tests
// and tools can build a tokenizer from any source.
//
// Ownership: a value type; Tokenizer::Create takes it by value.
// Thread-safety: none needed (plain data).

#ifndef BRAID_MODEL_TOKENIZER_TOKENIZER_DATA_H_
#define BRAID_MODEL_TOKENIZER_TOKENIZER_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace braid::model {

// Token types as stored in `tokenizer.ggml.token_type` (llama.cpp's
// llama_token_type); the integer values are part of the file format.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

inline constexpr int32_t kNoToken = -1;

struct TokenizerData {
  // `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama"
  // (SentencePiece: score-ordered merges, byte fallback, U+2581 for space).
  std::string model = "gpt2";
  // `tokenizer.ggml.pre`: selects the pre-tokenizer regexes ("smollm",
  // "gpt2", "llama3", "qwen2", "default", ...).
  std::string pre = "default";
  // Token texts in the byte-level (GPT-2 bytes_to_unicode) alphabet for BPE,
  // with U+2581 for space and "<0xXX>" byte tokens for SentencePiece; special
  // tokens are their literal text. Index = token id.
  std::vector<std::string> tokens;
  // Same length as `tokens`, or empty meaning all kNormal.
  std::vector<TokenType> token_types;
  // "left right" pairs; index = merge rank (lower merges first). BPE only.
  std::vector<std::string> merges;
  // `tokenizer.ggml.scores`: SentencePiece merge priorities (higher first),
  // same length as `tokens` or empty (all 0). SentencePiece only.
  std::vector<float> scores;
  // `tokenizer.ggml.add_space_prefix`: SentencePiece prefixes raw text that
  // starts the input or follows a special token with a space.
  bool add_space_prefix = true;
  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t pad_id = kNoToken;
  // End-of-turn; when kNoToken, Tokenizer looks for <|eot_id|>, <|im_end|>...
  int32_t eot_id = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_TOKENIZER_DATA_H_
