#include "model/tokenizer/testing/vocab_file.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace braid::model::testing {

absl::StatusOr<TokenizerData> ReadVocabFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  TokenizerData data;
  std::string line;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", why, " at '", line, "'"));
  };
  while (std::getline(in, line)) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(line, absl::MaxSplits('\t', 1));
    const std::string& key = kv.first;
    int64_t value = 0;
    if (key == "model") {
      data.model = kv.second;
    } else if (key == "pre") {
      data.pre = kv.second;
    } else if (!absl::SimpleAtoi(kv.second, &value)) {
      return bad("expected an integer");
    } else if (key == "bos") {
      data.bos_id = static_cast<int32_t>(value);
    } else if (key == "eos") {
      data.eos_id = static_cast<int32_t>(value);
    } else if (key == "unk") {
      data.unk_id = static_cast<int32_t>(value);
    } else if (key == "pad") {
      data.pad_id = static_cast<int32_t>(value);
    } else if (key == "eot") {
      data.eot_id = static_cast<int32_t>(value);
    } else if (key == "add_bos") {
      data.add_bos = value != 0;
    } else if (key == "add_eos") {
      data.add_eos = value != 0;
    } else if (key == "tokens") {
      for (int64_t i = 0; i < value && std::getline(in, line); ++i) {
        std::pair<std::string, std::string> tt =
            absl::StrSplit(line, absl::MaxSplits('\t', 1));
        int type = 0;
        if (!absl::SimpleAtoi(tt.first, &type)) return bad("bad token type");
        data.token_types.push_back(static_cast<TokenType>(type));
        data.tokens.push_back(std::move(tt.second));
      }
    } else if (key == "merges") {
      for (int64_t i = 0; i < value && std::getline(in, line); ++i) {
        data.merges.push_back(line);
      }
    } else {
      return bad("unknown key");
    }
  }
  return data;
}

std::string TestDataPath(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string relative = "model/tokenizer/testdata/" + name;
  if (srcdir == nullptr) return relative;
  return absl::StrCat(srcdir, "/", workspace ? workspace : "braid", "/",
                      relative);
}

const Tokenizer& SmolLm2Tokenizer() {
  static const Tokenizer* tokenizer = [] {
    absl::StatusOr<TokenizerData> data =
        ReadVocabFile(TestDataPath("smollm2_vocab.txt"));
    if (!data.ok()) {
      fprintf(stderr, "%s\n", data.status().ToString().c_str());
      std::abort();
    }
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
        Tokenizer::Create(*std::move(data));
    if (!tok.ok()) {
      fprintf(stderr, "%s\n", tok.status().ToString().c_str());
      std::abort();
    }
    return tok->release();
  }();
  return *tokenizer;
}

}  // namespace braid::model::testing
