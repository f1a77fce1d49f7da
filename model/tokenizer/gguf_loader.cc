#include "model/tokenizer/gguf_loader.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

constexpr char kPrefix[] = "tokenizer.ggml.";

std::string Key(const char* name) { return absl::StrCat(kPrefix, name); }

absl::Status Annotate(const absl::Status& status, const std::string& key) {
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF tokenizer key ", key, ": ", status.message()));
}

// Reads an optional token id; absent keys leave `*id` unchanged.
absl::Status ReadOptionalId(const GgufFile& gguf, const char* name,
                            int32_t* id) {
  const std::string key = Key(name);
  if (!gguf.Has(key)) return absl::OkStatus();
  absl::StatusOr<int64_t> value = gguf.GetInt(key);
  if (!value.ok()) return Annotate(value.status(), key);
  *id = static_cast<int32_t>(*value);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& gguf, const char* name,
                              bool* flag) {
  const std::string key = Key(name);
  if (!gguf.Has(key)) return absl::OkStatus();
  absl::StatusOr<bool> value = gguf.GetBool(key);
  if (!value.ok()) return Annotate(value.status(), key);
  *flag = *value;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& gguf) {
  TokenizerData data;
  {
    absl::StatusOr<std::string> model = gguf.GetString(Key("model"));
    if (!model.ok()) return Annotate(model.status(), Key("model"));
    data.model = *std::move(model);
  }
  if (gguf.Has(Key("pre"))) {
    absl::StatusOr<std::string> pre = gguf.GetString(Key("pre"));
    if (!pre.ok()) return Annotate(pre.status(), Key("pre"));
    data.pre = *std::move(pre);
  }
  {
    absl::StatusOr<std::vector<std::string>> tokens =
        gguf.GetStringArray(Key("tokens"));
    if (!tokens.ok()) return Annotate(tokens.status(), Key("tokens"));
    data.tokens = *std::move(tokens);
  }
  if (gguf.Has(Key("token_type"))) {
    absl::StatusOr<std::vector<int64_t>> types =
        gguf.GetIntArray(Key("token_type"));
    if (!types.ok()) return Annotate(types.status(), Key("token_type"));
    data.token_types.reserve(types->size());
    for (int64_t type : *types) {
      data.token_types.push_back(static_cast<TokenType>(type));
    }
  }
  if (gguf.Has(Key("merges"))) {
    absl::StatusOr<std::vector<std::string>> merges =
        gguf.GetStringArray(Key("merges"));
    if (!merges.ok()) return Annotate(merges.status(), Key("merges"));
    data.merges = *std::move(merges);
  }
  if (gguf.Has(Key("scores"))) {
    absl::StatusOr<std::vector<float>> scores =
        gguf.GetFloatArray(Key("scores"));
    if (!scores.ok()) return Annotate(scores.status(), Key("scores"));
    data.scores = *std::move(scores);
  }
  BRAID_RETURN_IF_ERROR(
      ReadOptionalBool(gguf, "add_space_prefix", &data.add_space_prefix));
  // llama.cpp's defaults: SentencePiece adds BOS, as do Llama 3's BPE
  // pre-tokenizers; add_bos_token (below) overrides.
  data.add_bos = data.model == "llama" || data.pre == "llama3" ||
                 data.pre == "llama-v3" || data.pre == "llama-bpe" ||
                 data.pre == "falcon3";
  for (const auto& [name, id] : {std::pair{"bos_token_id", &data.bos_id},
                                 std::pair{"eos_token_id", &data.eos_id},
                                 std::pair{"unknown_token_id", &data.unk_id},
                                 std::pair{"padding_token_id", &data.pad_id},
                                 std::pair{"eot_token_id", &data.eot_id}}) {
    BRAID_RETURN_IF_ERROR(ReadOptionalId(gguf, name, id));
  }
  BRAID_RETURN_IF_ERROR(ReadOptionalBool(gguf, "add_bos_token", &data.add_bos));
  BRAID_RETURN_IF_ERROR(ReadOptionalBool(gguf, "add_eos_token", &data.add_eos));
  return data;
}

absl::StatusOr<std::optional<std::string>> ChatTemplateFromGguf(
    const GgufFile& gguf) {
  constexpr char kKey[] = "tokenizer.chat_template";
  if (!gguf.Has(kKey)) return std::optional<std::string>();
  absl::StatusOr<std::string> source = gguf.GetString(kKey);
  if (!source.ok()) return Annotate(source.status(), kKey);
  return std::optional<std::string>(*std::move(source));
}

}  // namespace braid::model
