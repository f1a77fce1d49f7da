// Loading a GGUF file for braidd: its tokenizer, chat template and a model
// implementation of the seam (model/model.h): today the CPU one.
#ifndef BRAID_SERVER_LOAD_MODEL_H_
#define BRAID_SERVER_LOAD_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "server/flags.h"
#include "server/service.h"

namespace braid::server {

// Everything loaded from the GGUF file.
struct LoadedModel {
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<model::ChatTemplate> chat_template;  // null: unrecognised
  std::unique_ptr<model::Model> model;
  ServiceInfo info;
};

// Loads flags.model_path (--threads, --packed_matmul, --context_length
// capped by the model's training context) and logs what loading made of
// the file: its tensor types, sliding window and unused tensors.
absl::StatusOr<LoadedModel> LoadModel(const DaemonFlags& flags);

}  // namespace braid::server

#endif  // BRAID_SERVER_LOAD_MODEL_H_
