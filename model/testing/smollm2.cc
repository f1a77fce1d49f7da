#include "model/testing/smollm2.h"

#include <utility>

#include "model/gguf.h"
#include "model/testing/model_path.h"
#include "model/tokenizer/gguf_loader.h"
#include "util/status_macros.h"

namespace braid::model::testing {

absl::StatusOr<LoadedModel> LoadSmolLm2(bool with_weights) {
  const std::string path = SmolLm2Path();
  if (path.empty()) return absl::FailedPreconditionError(kNoModelMessage);
  BRAID_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  BRAID_ASSIGN_OR_RETURN(TokenizerData data, TokenizerDataFromGguf(*file));
  LoadedModel loaded;
  BRAID_ASSIGN_OR_RETURN(loaded.tokenizer, Tokenizer::Create(std::move(data)));
  if (with_weights) {
    BRAID_ASSIGN_OR_RETURN(loaded.model,
                           LlamaModel::Load(std::move(file), LoadOptions{}));
  }
  return loaded;
}

}  // namespace braid::model::testing
