// UTF-8 helpers and the GPT-2 byte-level alphabet used by the BPE tokenizer.
//
// The byte-level alphabet (GPT-2's `bytes_to_unicode`) maps each of the 256
// byte values to one printable code point, so any byte string becomes a
// string of "characters" that BPE merges can operate on.
//
// Thread-safety: all functions are pure; the tables are immutable statics.

#ifndef BRAID_MODEL_TOKENIZER_UNICODE_H_
#define BRAID_MODEL_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braid::model {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the well-formed UTF-8 sequence starting at text[pos], or 0 if the
// bytes there are not a complete, well-formed sequence (RFC 3629: no
// overlongs, surrogates or code points above U+10FFFF).
size_t ValidUtf8Length(std::string_view text, size_t pos);

// Length in [1, 4] the lead byte announces (1 for invalid lead bytes).
size_t Utf8LengthFromLead(uint8_t lead);

// Decodes the well-formed sequence at text[pos] (caller checked it).
uint32_t DecodeUtf8(std::string_view text, size_t pos, size_t len);

// Appends the UTF-8 encoding of `cp` to `out`.
void AppendUtf8(uint32_t cp, std::string* out);

// True if the whole string is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// Length of the longest prefix of `text` that does not end inside an
// incomplete (but so far well-formed) multi-byte sequence. Bytes that can
// never become valid are included: they are not "waiting" for anything.
size_t CompleteUtf8Prefix(std::string_view text);

// Replaces every byte that is not part of a well-formed sequence by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// GPT-2 byte-level mapping: byte -> UTF-8 text of its code point.
const std::string& ByteToUnicode(uint8_t byte);

// Inverse of ByteToUnicode on code points; nullopt for code points outside
// the alphabet.
std::optional<uint8_t> UnicodeToByte(uint32_t cp);

// Maps raw bytes into the byte-level alphabet.
std::string BytesToByteLevel(std::string_view bytes);

// Maps byte-level text back to raw bytes. Code points outside the alphabet
// are copied through as their UTF-8 (they only occur in malformed vocabs).
std::string ByteLevelToBytes(std::string_view text);

}  // namespace braid::model

#endif  // BRAID_MODEL_TOKENIZER_UNICODE_H_
