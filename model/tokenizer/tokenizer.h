// Tokenizer: text <-> token ids, matching llama.cpp's tokenizers id for id:
// byte-level BPE (LLAMA_VOCAB_TYPE_BPE, model "gpt2") and SentencePiece
// (LLAMA_VOCAB_TYPE_SPM, model "llama": raw text with spaces as U+2581,
// prefixed with one where it starts the input or follows a special token;
// adjacent symbols merged highest score first while their concatenation is
// a token; what stays outside the vocabulary as <0xXX> byte tokens).
//
// Encoding pipeline (llama_vocab::tokenize):
//   1. Special-token partition: special tokens (types CONTROL, USER_DEFINED,
//      UNKNOWN), longest first, are cut out of the raw text. CONTROL and
//      UNKNOWN tokens only when `parse_special`; USER_DEFINED always.
//   2. The remaining text fragments go through the model's PreTokenizer.
//   3. Each piece is mapped to the GPT-2 byte-level alphabet and merged by
//      BPE rank; a symbol that is not in the vocabulary falls back to one
//      token per byte.
//
// Ownership: owns its vocabulary, merge ranks and PreTokenizer; create once
// per model and share. Thread-safety: immutable after Create; all methods
// are const and safe to call concurrently.

#ifndef BRAID_MODEL_TOKENIZER_TOKENIZER_H_
#define BRAID_MODEL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/tokenizer_data.h"

namespace braid::model {

class Tokenizer {
 public:
  // Validates `data` (model "gpt2" with a known pre-tokenizer and well-formed
  // merges, or "llama" with scores for every token; special ids in range)
  // and builds the lookup tables.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerData data);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Tokenizes `text` (any bytes; invalid UTF-8 still tokenizes byte-wise).
  // `add_special` adds BOS/EOS as the model asks (add_bos/add_eos).
  // `parse_special` lets control tokens written in the text, such as
  // "<|im_start|>", become their ids; otherwise they are plain text.
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const;

  // Raw bytes of one token; special tokens as their literal text. Empty for
  // ids out of range.
  const std::string& TokenBytes(int32_t id) const;

  // Concatenation of TokenBytes (SentencePiece: without the space its
  // encoding prefixed to the first token). May end in (or contain) partial
  // UTF-8.
  std::string Decode(absl::Span<const int32_t> ids) const;

  std::optional<int32_t> FindToken(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t eot_id() const { return eot_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  // True for tokens that end a generation: eos, eot and the usual
  // end-of-turn texts (<|im_end|>, <|endoftext|>, <|eot_id|>, ...) present
  // in this vocabulary.
  bool IsEndOfGeneration(int32_t id) const;

  // True for CONTROL tokens (after llama.cpp's promotion of end-of-turn
  // tokens to CONTROL).
  bool IsControl(int32_t id) const;

  TokenType token_type(int32_t id) const;

 private:
  explicit Tokenizer(std::unique_ptr<PreTokenizer> pre_tokenizer);
  // Create's parts, after the data is checked: the merge ranks, the end
  // tokens found by text, each token's bytes and the special tokens.
  absl::Status IndexMerges(const std::vector<std::string>& merges);
  void FindEndTokens();
  void IndexTokenBytes();

  // Steps 2-3 of the pipeline for one raw-text fragment.
  void EncodeFragment(std::string_view text, std::vector<int32_t>* out) const;
  // BPE-merges one byte-level word and appends its token ids.
  void EncodeWord(const std::string& word, std::vector<int32_t>* out) const;
  int MergeRank(std::string_view left, std::string_view right,
                std::string* scratch) const;
  // SentencePiece: one raw-text fragment, spaces already U+2581 (llama.cpp's
  // llm_tokenizer_spm_session::tokenize).
  void EncodeSpm(const std::string& text, std::vector<int32_t>* out) const;

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<std::string> tokens_;       // Byte-level text, by id.
  std::vector<std::string> token_bytes_;  // Raw bytes, by id.
  std::vector<TokenType> token_types_;
  absl::flat_hash_map<std::string, int32_t> token_ids_;
  absl::flat_hash_map<std::string, int> merge_ranks_;  // "left right" -> rank.
  std::vector<int32_t> special_tokens_;  // Partition order: longest first.
  std::vector<int32_t> end_of_generation_;
  bool ignore_merges_ = false;
  bool spm_ = false;               // model "llama"
  bool add_space_prefix_ = false;  // SentencePiece only
  std::vector<float> scores_;      // SentencePiece, by id
  int32_t byte_ids_[256];          // SentencePiece <0xXX>, or -1
  int32_t bos_id_ = kNoToken;
  int32_t eos_id_ = kNoToken;
  int32_t eot_id_ = kNoToken;
  int32_t unk_id_ = kNoToken;
  int32_t pad_id_ = kNoToken;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_TOKENIZER_H_
