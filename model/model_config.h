// Hyperparameters of a Llama-family model, read from GGUF metadata.
//
// LlamaConfig is a plain value; FromGguf validates it (supported architecture,
// positive sizes, head counts that divide evenly, rope dims within a head) and
// names the missing or bad key in its error.
#ifndef BRAID_MODEL_MODEL_CONFIG_H_
#define BRAID_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf.h"

namespace braid::model {

struct LlamaConfig {
  std::string arch;  // general.architecture, e.g. "llama".
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // n_embd / n_head.
  int n_rot = 0;     // Rotary dimensions per head (<= head_dim).
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;

  // Multi-stream metadata (docs/MULTISTREAM.md "Model metadata"), from the
  // braid.streams.* keys; without them the model is single-stream:
  // n_streams 1, no roles, aligned, no silence token.
  enum class StreamLayout { kAligned, kRows };
  int n_streams = 1;                      // braid.streams.count, >= 1.
  std::vector<std::string> stream_roles;  // [n_streams] or empty.
  StreamLayout stream_layout = StreamLayout::kAligned;
  int silence_token_id = -1;  // In [0, n_vocab), or -1 when not given.

  int kv_dim() const { return n_head_kv * head_dim; }

  // Reads `<arch>.*` and `braid.streams.*` keys. n_vocab comes from
  // token_embd.weight's shape. braid.streams.roles (string array of
  // n_streams), .layout ("aligned" | "rows", default aligned) and
  // .silence_token_id (required by rows) need braid.streams.count.
  static absl::StatusOr<LlamaConfig> FromGguf(const GgufFile& file);
};

}  // namespace braid::model

#endif  // BRAID_MODEL_MODEL_CONFIG_H_
