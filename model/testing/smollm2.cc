#include "model/testing/smollm2.h"

#include <utility>

#include "model/gguf.h"
#include "model/testing/model_path.h"
#include "model/tokenizer/gguf_loader.h"

namespace braid::model::testing {

absl::StatusOr<LoadedModel> LoadSmolLm2(bool with_weights) {
  const std::string path = SmolLm2Path();
  if (path.empty()) return absl::FailedPreconditionError(kNoModelMessage);
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(**file);
  if (!data.ok()) return data.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Create(*std::move(data));
  if (!tokenizer.ok()) return tokenizer.status();
  LoadedModel loaded;
  loaded.tokenizer = *std::move(tokenizer);
  if (with_weights) {
    absl::StatusOr<std::unique_ptr<LlamaModel>> llama =
        LlamaModel::Load(*std::move(file), {});
    if (!llama.ok()) return llama.status();
    loaded.model = *std::move(llama);
  }
  return loaded;
}

}  // namespace braid::model::testing
