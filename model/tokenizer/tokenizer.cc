#include "model/tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/tokenizer/unicode.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

// Texts llama.cpp treats as end-of-turn (first one present becomes eot_id
// when the file names none) and as end-of-generation. Both kinds are forced
// to CONTROL, as llama.cpp does.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>",     "<EOT>",      "_<EOT>",  "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>",    "<|end|>",         "<|return|>",
    "<|call|>",   "<end_of_turn>", "<|endoftext|>",   "<|eom_id|>",
    "<EOT>",      "_<EOT>",        "<|end_of_text|>", "<end_of_utterance>"};

absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

bool IsSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

bool IsPreTokenizerWithoutMerges(std::string_view pre) {
  // llama.cpp sets ignore_merges for the LLAMA3 pre-tokenizer family: a word
  // that is itself a token is emitted without merging.
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" ||
         pre == "falcon3";
}

absl::Status CheckId(int32_t id, size_t n, std::string_view what) {
  if (id == kNoToken || (id >= 0 && static_cast<size_t>(id) < n)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(AsAbsl(what), " id ", id, " outside vocabulary of ", n));
}

// SentencePiece's space marker, U+2581.
constexpr char kSpmSpace[] = "\xe2\x96\x81";

// The byte of a SentencePiece byte token "<0xXX>", or -1.
int SpmByte(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') {
    return -1;
  }
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// One symbol of the word being merged: [start, start + n) of the word.
// n == 0 marks a symbol merged into its left neighbour.
struct Symbol {
  size_t start;
  size_t n;
  int prev;
  int next;
};

struct Bigram {
  int rank;
  int left;
  int right;
  size_t size;  // Bytes of left + right when queued; stale if they changed.
};

// Orders the queue so top() is the lowest rank, then the leftmost pair.
struct BigramAfter {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<PreTokenizer> pre_tokenizer)
    : pre_tokenizer_(std::move(pre_tokenizer)) {}

namespace {

// What Create needs of the data before it builds anything.
absl::Status CheckData(const TokenizerData& data, bool spm) {
  const size_t n = data.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("empty vocabulary");
  if (!data.token_types.empty() && data.token_types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_types has ", data.token_types.size(),
                     " entries for ", n, " tokens"));
  }
  for (const auto& [id, what] :
       {std::pair{data.bos_id, "bos"}, std::pair{data.eos_id, "eos"},
        std::pair{data.unk_id, "unk"}, std::pair{data.pad_id, "pad"},
        std::pair{data.eot_id, "eot"}}) {
    BRAID_RETURN_IF_ERROR(CheckId(id, n, what));
  }
  if (spm && !data.scores.empty() && data.scores.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scores has ", data.scores.size(), " entries for ", n, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(
    TokenizerData data) {
  const bool spm = data.model == "llama";
  if (data.model != "gpt2" && !spm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported tokenizer model '", data.model,
        "' (braid reads gpt2 byte-level BPE and llama SentencePiece)"));
  }
  BRAID_RETURN_IF_ERROR(CheckData(data, spm));
  const size_t n = data.tokens.size();
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  if (!spm) {
    BRAID_ASSIGN_OR_RETURN(pre_tokenizer, PreTokenizer::Create(data.pre));
  }

  auto tok =
      std::unique_ptr<Tokenizer>(new Tokenizer(std::move(pre_tokenizer)));
  tok->spm_ = spm;
  tok->add_space_prefix_ = spm && data.add_space_prefix;
  tok->scores_ = data.scores.empty() ? std::vector<float>(spm ? n : 0, 0.0f)
                                     : std::move(data.scores);
  tok->ignore_merges_ = IsPreTokenizerWithoutMerges(data.pre);
  tok->bos_id_ = data.bos_id;
  tok->eos_id_ = data.eos_id;
  tok->unk_id_ = data.unk_id;
  tok->pad_id_ = data.pad_id;
  tok->eot_id_ = data.eot_id;
  tok->add_bos_ = data.add_bos;
  tok->add_eos_ = data.add_eos;
  tok->token_types_ = data.token_types.empty()
                          ? std::vector<TokenType>(n, TokenType::kNormal)
                          : std::move(data.token_types);
  tok->tokens_ = std::move(data.tokens);
  tok->token_ids_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    tok->token_ids_[tok->tokens_[id]] = static_cast<int32_t>(id);  // Last wins.
  }
  BRAID_RETURN_IF_ERROR(tok->IndexMerges(data.merges));
  tok->FindEndTokens();
  tok->IndexTokenBytes();
  return tok;
}

absl::Status Tokenizer::IndexMerges(const std::vector<std::string>& merges) {
  merge_ranks_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed merge ", rank, ": '", merge, "'"));
    }
    merge_ranks_.try_emplace(merge, static_cast<int>(rank));
  }
  return absl::OkStatus();
}

// End-of-turn / end-of-generation detection by text, as llama.cpp does.
void Tokenizer::FindEndTokens() {
  for (std::string_view text : kEotTexts) {
    if (eot_id_ != kNoToken) break;
    if (auto id = token_ids_.find(AsAbsl(text)); id != token_ids_.end()) {
      eot_id_ = id->second;
      token_types_[id->second] = TokenType::kControl;
    }
  }
  for (std::string_view text : kEogTexts) {
    if (auto id = token_ids_.find(AsAbsl(text)); id != token_ids_.end()) {
      end_of_generation_.push_back(id->second);
      token_types_[id->second] = TokenType::kControl;
    }
  }
  for (int32_t id : {eos_id_, eot_id_}) {
    if (id != kNoToken) end_of_generation_.push_back(id);
  }
}

void Tokenizer::IndexTokenBytes() {
  const size_t n = tokens_.size();
  token_bytes_.resize(n);
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), kNoToken);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = tokens_[id];
    if (IsSpecialType(token_types_[id])) {
      special_tokens_.push_back(static_cast<int32_t>(id));
      token_bytes_[id] = text;
    } else if (!spm_) {
      token_bytes_[id] = ByteLevelToBytes(text);
    } else if (int byte; token_types_[id] == TokenType::kByte &&
                         (byte = SpmByte(text)) >= 0) {
      token_bytes_[id] = std::string(1, static_cast<char>(byte));
      byte_ids_[byte] = static_cast<int32_t>(id);
    } else {
      token_bytes_[id] = absl::StrReplaceAll(text, {{kSpmSpace, " "}});
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) {
                     return tokens_[a].size() > tokens_[b].size();
                   });
}

// Design note: the special-token partition follows llama.cpp's
// tokenizer_st_partition exactly: special tokens are taken one at a time,
// longest first, and each one splits every still-raw fragment at all of its
// (leftmost, non-overlapping) occurrences. Doing it token by token rather
// than scanning the text once is what makes "longest first" win overlaps the
// same way llama.cpp does.
std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  struct Fragment {
    int32_t token;  // kNoToken for raw text.
    std::string_view text;
  };
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, text});
  std::vector<Fragment> next;
  for (int32_t special : special_tokens_) {
    const TokenType type = token_types_[special];
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& needle = tokens_[special];
    if (needle.empty()) continue;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (size_t pos; (pos = rest.find(needle)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({kNoToken, rest.substr(0, pos)});
        next.push_back({special, {}});
        rest.remove_prefix(pos + needle.size());
      }
      if (!rest.empty()) next.push_back({kNoToken, rest});
    }
    fragments.swap(next);
  }

  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_ && bos_id_ != kNoToken) ids.push_back(bos_id_);
  // SentencePiece prefixes a space to raw text at the start or after a
  // special token (llama.cpp's is_prev_special, true at the start).
  bool prev_special = true;
  for (const Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      ids.push_back(fragment.token);
      prev_special = true;
    } else if (spm_) {
      std::string raw = add_space_prefix_ && prev_special ? " " : "";
      raw.append(fragment.text.data(), fragment.text.size());
      EncodeSpm(absl::StrReplaceAll(raw, {{" ", kSpmSpace}}), &ids);
      prev_special = false;
    } else {
      EncodeFragment(fragment.text, &ids);
    }
  }
  if (add_special && add_eos_ && eos_id_ != kNoToken) ids.push_back(eos_id_);
  return ids;
}

void Tokenizer::EncodeFragment(std::string_view text,
                               std::vector<int32_t>* out) const {
  for (std::string_view piece : pre_tokenizer_->Split(text)) {
    EncodeWord(BytesToByteLevel(piece), out);
  }
}

int Tokenizer::MergeRank(std::string_view left, std::string_view right,
                         std::string* scratch) const {
  scratch->assign(left.data(), left.size());
  scratch->push_back(' ');
  scratch->append(right.data(), right.size());
  auto it = merge_ranks_.find(*scratch);
  return it == merge_ranks_.end() ? -1 : it->second;
}

// Design note: this is llama.cpp's llm_tokenizer_bpe_session::tokenize. The
// word starts as one symbol per code point of its byte-level text; a
// priority queue holds every adjacent pair that has a merge rank, lowest
// rank (then leftmost) first. Popping a pair merges the right symbol into the
// left one and queues the two new neighbour pairs. Entries made stale by an
// earlier merge are recognised by their recorded byte size and skipped.
void Tokenizer::EncodeWord(const std::string& word,
                           std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = token_ids_.find(word); it != token_ids_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = std::min(
        word.size() - pos, Utf8LengthFromLead(static_cast<uint8_t>(word[pos])));
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(
        {pos, len, index - 1, pos + len == word.size() ? -1 : index + 1});
    pos += len;
  }

  std::string scratch;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramAfter> queue;
  auto add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::string_view w(word);
    const int rank =
        MergeRank(w.substr(l.start, l.n), w.substr(r.start, r.n), &scratch);
    if (rank >= 0) queue.push({rank, left, right, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) {
    add_bigram(i - 1, i);
  }
  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) {
      continue;
    }
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    add_bigram(left.prev, bigram.left);
    add_bigram(bigram.left, left.next);
  }

  for (const Symbol& symbol : symbols) {
    if (symbol.n == 0) continue;
    const std::string_view text(word.data() + symbol.start, symbol.n);
    if (auto it = token_ids_.find(AsAbsl(text)); it != token_ids_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Not in the vocabulary: one token per byte (per byte-level character).
    for (size_t pos = 0; pos < text.size();) {
      const size_t len =
          std::min(text.size() - pos,
                   Utf8LengthFromLead(static_cast<uint8_t>(text[pos])));
      auto it = token_ids_.find(AsAbsl(text.substr(pos, len)));
      // A byte missing from the vocabulary is dropped, as in llama.cpp.
      if (it != token_ids_.end()) out->push_back(it->second);
      pos += len;
    }
  }
}

// Design note: llama.cpp's llm_tokenizer_spm_session. The text starts as one
// symbol per UTF-8 character; every adjacent pair whose concatenation is a
// token is queued by that token's score (highest first, then leftmost), and
// popping one merges it and queues the new neighbours, as the BPE loop does
// with ranks. Each pair queued records its text's halves (the last pair
// queued with a text wins, as in llama.cpp's rev_merge), so a final symbol
// that is not a token is split back along them, down to <0xXX> byte tokens.
void Tokenizer::EncodeSpm(const std::string& text,
                          std::vector<int32_t>* out) const {
  if (text.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min(
        text.size() - pos, Utf8LengthFromLead(static_cast<uint8_t>(text[pos])));
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(
        {pos, len, index - 1, pos + len == text.size() ? -1 : index + 1});
    pos += len;
  }
  struct Pair {
    float score;
    int left, right;
    size_t size;
  };
  auto after = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(after)> queue(after);
  absl::flat_hash_map<std::string, std::pair<int, int>> halves;
  auto add_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string joined =
        text.substr(symbols[left].start, symbols[left].n + symbols[right].n);
    auto it = token_ids_.find(joined);
    if (it == token_ids_.end()) return;
    queue.push({scores_[it->second], left, right, joined.size()});
    halves[joined] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_pair(i - 1, i);
  while (!queue.empty()) {
    const Pair pair = queue.top();
    queue.pop();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != pair.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    add_pair(left.prev, pair.left);
    add_pair(pair.left, left.next);
  }
  // A symbol's tokens: itself, or its recorded halves', or its bytes.
  auto resegment = [&](const Symbol& symbol, auto& self) -> void {
    const std::string piece = text.substr(symbol.start, symbol.n);
    if (auto it = token_ids_.find(piece); it != token_ids_.end()) {
      out->push_back(it->second);
      return;
    }
    if (auto h = halves.find(piece); h != halves.end()) {
      self(symbols[h->second.first], self);
      self(symbols[h->second.second], self);
      return;
    }
    for (const char c : piece) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id != kNoToken) {
        out->push_back(id);
      } else if (auto it = token_ids_.find(std::string(1, c));
                 it != token_ids_.end()) {
        out->push_back(it->second);  // llama.cpp's fallback: the byte's text
      }
    }
  };
  for (int i = 0; i >= 0; i = symbols[i].next) resegment(symbols[i], resegment);
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  static const std::string* const kEmpty = new std::string;
  if (id < 0 || id >= vocab_size()) return *kEmpty;
  return token_bytes_[id];
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id);
  // SentencePiece: the space Encode prefixed (llama.cpp's detokenize strips
  // one from the first piece).
  if (add_space_prefix_ && !ids.empty() && !IsSpecialType(token_type(ids[0])) &&
      !out.empty() && out[0] == ' ') {
    out.erase(0, 1);
  }
  return out;
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  if (auto it = token_ids_.find(AsAbsl(text));
      it != token_ids_.end() && IsSpecialType(token_types_[it->second])) {
    return it->second;
  }
  const std::string normal =
      spm_ ? absl::StrReplaceAll(AsAbsl(text), {{" ", kSpmSpace}})
           : BytesToByteLevel(text);
  if (auto it = token_ids_.find(normal);
      it != token_ids_.end() && !IsSpecialType(token_types_[it->second])) {
    return it->second;
  }
  return std::nullopt;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id != kNoToken &&
         std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
             end_of_generation_.end();
}

bool Tokenizer::IsControl(int32_t id) const {
  return token_type(id) == TokenType::kControl;
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return token_types_[id];
}

}  // namespace braid::model
