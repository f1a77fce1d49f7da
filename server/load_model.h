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
  // On a GPU: the KV cache's tokens, from --gpu_memory_fraction of the
  // memory left free by the weights (0: the engine flags size it).
  int kv_budget_tokens = 0;
  // Entries past each decoding step its KV blocks cover (the scheduler's
  // lookahead_slots): 1 where the model runs lookahead steps.
  int lookahead_slots = 0;
};

// Loads flags.model_path on --device (the CPU model: --threads,
// --packed_matmul; the CUDA model in a braidd built with --config=cuda),
// --context_length capped by the model's training context, and logs what
// loading made of the file: its tensor types, sliding window and unused
// tensors. --device=cuda in a braidd without CUDA: UNIMPLEMENTED saying how
// to build one.
absl::StatusOr<LoadedModel> LoadModel(const DaemonFlags& flags);

}  // namespace braid::server

#endif  // BRAID_SERVER_LOAD_MODEL_H_
