#include "model/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"

namespace braid::model {
namespace {

// The regex lists are llama.cpp's (llm_tokenizer_bpe), which in turn are the
// HF tokenizer.json patterns with case-insensitive groups spelled out.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

constexpr char kLlama3Pattern[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr char kQwen2Pattern[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool OneOf(std::string_view name, std::initializer_list<std::string_view> set) {
  for (std::string_view s : set) {
    if (name == s) return true;
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> PatternsFor(std::string_view name) {
  if (name.empty() || name == "default") {
    return std::vector<std::string>{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Pattern,
                                    R"(\p{N}+)", "[0-9][0-9][0-9]"};
  }
  if (OneOf(name, {"gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "jina-v1-en",
                   "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe",
                   "mpt", "olmo", "jais"})) {
    return std::vector<std::string>{kGpt2Pattern};
  }
  if (OneOf(name, {"smollm", "starcoder", "refact", "command-r", "codeshell",
                   "exaone", "minerva-7b"})) {
    return std::vector<std::string>{R"(\p{N})", kGpt2Pattern};
  }
  if (OneOf(name, {"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    return std::vector<std::string>{kLlama3Pattern};
  }
  if (OneOf(name, {"qwen2", "deepseek-r1-qwen"})) {
    return std::vector<std::string>{kQwen2Pattern};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pre-tokenizer '", std::string(name),
                   "' (supported: smollm, gpt2, llama3, qwen2, default)"));
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::vector<std::unique_ptr<Regex>> regexes)
    : regexes_(std::move(regexes)) {}

PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    std::string_view name) {
  absl::StatusOr<std::vector<std::string>> patterns = PatternsFor(name);
  if (!patterns.ok()) return patterns.status();
  return FromPatterns(*patterns);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromPatterns(
    const std::vector<std::string>& patterns) {
  std::vector<std::unique_ptr<Regex>> regexes;
  for (const std::string& pattern : patterns) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                &error_code, &error_offset, nullptr);
    if (regex->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return absl::InvalidArgumentError(absl::StrCat(
          "bad pre-tokenizer regex '", pattern, "' at ", error_offset, ": ",
          reinterpret_cast<const char*>(message)));
    }
    // JIT is an optimisation only; the interpreter is used if it fails.
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regexes.push_back(std::move(regex));
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(regexes)));
}

// Design note: pieces are tracked as [begin, end) offsets into a valid-UTF-8
// working copy of the text (invalid bytes -> U+FFFD, 3 bytes each). Every
// regex pass maps the offset list to a finer one. At the end the offsets are
// translated back to the caller's bytes, which is exact because piece
// boundaries always fall on code-point boundaries of the working copy.
std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  if (text.empty()) return {};
  const bool valid = IsValidUtf8(text);
  const std::string sanitized = valid ? std::string() : SanitizeUtf8(text);
  const std::string_view work = valid ? text : std::string_view(sanitized);

  std::vector<size_t> bounds = {0, work.size()};  // Piece i: [b[i], b[i+1]).
  pcre2_match_data* match = pcre2_match_data_create(1, /*gcontext=*/nullptr);
  for (const auto& regex : regexes_) {
    std::vector<size_t> next = {0};
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      const size_t begin = bounds[i];
      const std::string_view piece = work.substr(begin, bounds[i + 1] - begin);
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(regex->code, subject, piece.size(), start,
                                   PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc < 0) break;  // No further match (or an error): rest is a gap.
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        size_t m_begin = ovector[0], m_end = ovector[1];
        if (m_end == m_begin) {
          // Empty match: none of our patterns produce one; step one code
          // point so a custom pattern cannot loop forever.
          start = m_begin +
                  Utf8LengthFromLead(static_cast<uint8_t>(piece[m_begin]));
          continue;
        }
        if (m_begin > next.back() - begin) next.push_back(begin + m_begin);
        next.push_back(begin + m_end);
        start = m_end;
      }
      if (next.back() != begin + piece.size()) {
        next.push_back(begin + piece.size());
      }
    }
    bounds = std::move(next);
  }
  pcre2_match_data_free(match);

  // Translate working-copy offsets back to `text` offsets.
  std::vector<std::string_view> pieces;
  pieces.reserve(bounds.size());
  if (valid) {
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      pieces.push_back(text.substr(bounds[i], bounds[i + 1] - bounds[i]));
    }
    return pieces;
  }
  size_t src = 0, dst = 0, b = 1, piece_start = 0;
  while (src < text.size()) {
    const size_t len = ValidUtf8Length(text, src);
    src += len == 0 ? 1 : len;
    dst += len == 0 ? 3 : len;
    if (dst == bounds[b]) {
      pieces.push_back(text.substr(piece_start, src - piece_start));
      piece_start = src;
      ++b;
    }
  }
  return pieces;
}

}  // namespace braid::model
