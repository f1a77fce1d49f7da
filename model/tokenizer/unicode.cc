#include "model/tokenizer/unicode.h"

#include <array>

namespace braid::model {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> byte_to_text;
  std::array<uint32_t, 256> byte_to_cp;
};

// GPT-2 bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// rest to 256, 257, ... in byte order.
const ByteLevelTables& Tables() {
  static const ByteLevelTables* tables = [] {
    auto* t = new ByteLevelTables;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) ||
                             (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      t->byte_to_cp[b] = printable ? b : next++;
      AppendUtf8(t->byte_to_cp[b], &t->byte_to_text[b]);
    }
    return t;
  }();
  return *tables;
}

bool IsContinuation(uint8_t c) { return (c & 0xC0) == 0x80; }

// True if `tail` is shorter than the sequence its lead byte announces and
// every byte so far is allowed there, i.e. more bytes could complete it.
bool IsIncompleteSequence(std::string_view tail) {
  const auto c0 = static_cast<uint8_t>(tail[0]);
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    need = 2;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    need = 3;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    need = 4;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (tail.size() >= need) return false;
  if (tail.size() >= 2) {
    const auto c1 = static_cast<uint8_t>(tail[1]);
    if (c1 < lo || c1 > hi) return false;
  }
  if (tail.size() >= 3 && !IsContinuation(static_cast<uint8_t>(tail[2]))) {
    return false;
  }
  return true;
}

}  // namespace

size_t Utf8LengthFromLead(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

size_t ValidUtf8Length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const auto c0 = static_cast<uint8_t>(text[pos]);
  if (c0 < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    len = 2;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    len = 3;
    if (c0 == 0xE0) lo = 0xA0;  // Overlong.
    if (c0 == 0xED) hi = 0x9F;  // Surrogates.
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    len = 4;
    if (c0 == 0xF0) lo = 0x90;  // Overlong.
    if (c0 == 0xF4) hi = 0x8F;  // Above U+10FFFF.
  } else {
    return 0;
  }
  if (pos + len > text.size()) return 0;
  const auto c1 = static_cast<uint8_t>(text[pos + 1]);
  if (c1 < lo || c1 > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (!IsContinuation(static_cast<uint8_t>(text[pos + i]))) return 0;
  }
  return len;
}

uint32_t DecodeUtf8(std::string_view text, size_t pos, size_t len) {
  const auto c0 = static_cast<uint8_t>(text[pos]);
  if (len == 1) return c0;
  uint32_t cp = c0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  }
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = ValidUtf8Length(text, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

size_t CompleteUtf8Prefix(std::string_view text) {
  // A pending sequence is at most 3 bytes long: find the last lead byte within
  // the final 3 bytes and ask whether it starts a valid-so-far prefix.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    if (IsContinuation(static_cast<uint8_t>(text[pos]))) continue;
    return IsIncompleteSequence(text.substr(pos)) ? pos : n;
  }
  return n;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = ValidUtf8Length(text, pos);
    if (len == 0) {
      AppendUtf8(kReplacementChar, &out);
      ++pos;
    } else {
      out.append(text.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

const std::string& ByteToUnicode(uint8_t byte) {
  return Tables().byte_to_text[byte];
}

std::optional<uint8_t> UnicodeToByte(uint32_t cp) {
  if (cp < 256) {
    if (Tables().byte_to_cp[cp] == cp) return static_cast<uint8_t>(cp);
    return std::nullopt;
  }
  // Non-printable bytes map to 256..323 in byte order.
  static const std::array<int16_t, 68>* inverse = [] {
    auto* inv = new std::array<int16_t, 68>;
    inv->fill(-1);
    for (int b = 0; b < 256; ++b) {
      const uint32_t c = Tables().byte_to_cp[b];
      if (c >= 256) (*inv)[c - 256] = static_cast<int16_t>(b);
    }
    return inv;
  }();
  if (cp - 256 < inverse->size() && (*inverse)[cp - 256] >= 0) {
    return static_cast<uint8_t>((*inverse)[cp - 256]);
  }
  return std::nullopt;
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += ByteToUnicode(static_cast<uint8_t>(c));
  return out;
}

std::string ByteLevelToBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = ValidUtf8Length(text, pos);
    if (len == 0) {
      out.push_back(text[pos++]);
      continue;
    }
    const std::optional<uint8_t> byte =
        UnicodeToByte(DecodeUtf8(text, pos, len));
    if (byte.has_value()) {
      out.push_back(static_cast<char>(*byte));
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

}  // namespace braid::model
