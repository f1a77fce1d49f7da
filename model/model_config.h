// Hyperparameters of a Llama-family model, read from GGUF metadata.
//
// LlamaConfig is a plain value; FromGguf validates it (supported architecture,
// positive sizes, head counts that divide evenly, rope dims within a head) and
// names the missing or bad key in its error. The architectures braid reads
// share one forward pass (model/llama.cc); each one is a small description
// here: which optional parts of the block it has (ArchTraits).
#ifndef BRAID_MODEL_MODEL_CONFIG_H_
#define BRAID_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf.h"
#include "model/model.h"

namespace braid::model {

// The parts of the shared Llama-family block an architecture uses.
struct ArchTraits {
  // RoPE on adjacent pairs (ggml's "normal": llama) or on halves of the
  // rotated dims (ggml's "neox": qwen2, qwen3).
  enum class Rope { kNormal, kNeox };
  Rope rope = Rope::kNormal;
  bool qkv_bias = false;  // blk.N.attn_{q,k,v}.bias (qwen2)
  bool qk_norm = false;   // blk.N.attn_{q,k}_norm.weight, per head (qwen3)
  // The gated FFN's activation: SiLU (SwiGLU) or GELU with ggml's tanh
  // approximation (GeGLU: gemma2, gemma3).
  enum class Ffn { kSilu, kGeluTanh };
  Ffn ffn = Ffn::kSilu;
  // Gemma's block: blk.N.post_attention_norm.weight and post_ffw_norm.weight
  // norm the attention and FFN outputs before their residual adds; the
  // embeddings are scaled by sqrt(n_embd); Q is scaled by Gemma's
  // query_pre_attn_scalar before the scores (LlamaConfig::q_scale).
  bool gemma = false;
  // Reads <arch>.attention.sliding_window (llama: Mistral's window).
  bool sliding_window = false;
  // With a window: layer il slides iff il % swa_pattern < swa_pattern - 1
  // (gemma2: 2, every other layer; gemma3: 6, five in six); 0: every layer.
  int swa_pattern = 0;
  // The window when the file gives none (gemma2: 4096, as llama.cpp).
  int default_window = 0;
  // Sliding layers' RoPE base, unscaled (gemma3: 10000; 0: the file's).
  float swa_rope_base = 0.0f;
  // llama.cpp's defaults of the soft-capping keys: attention scores
  // (gemma2: 50) and final logits (gemma2: 30); 0: off unless the file sets
  // <arch>.attn_logit_softcapping / final_logit_softcapping.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // The layer count of the variant whose query_pre_attn_scalar is
  // n_embd / n_head rather than the head size (Gemma's 27B models: 46 in
  // gemma2, 62 in gemma3). GGUF files do not carry the scalar; llama.cpp
  // infers it so, and braid does the same.
  int gemma_wide_scale_layers = 0;
};

// The traits of a general.architecture value, or nullptr when braid does not
// read it.
const ArchTraits* FindArch(const std::string& arch);
// The architectures FindArch knows, for error messages ("llama, qwen2, ...").
const char* SupportedArchs();

struct LlamaConfig {
  std::string arch;  // general.architecture, e.g. "llama".
  ArchTraits traits;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // attention.key_length, else n_embd / n_head.
  int n_rot = 0;     // Rotary dimensions per head (<= head_dim).
  float rope_base = 10000.0f;
  // rope.scaling.type "linear": positions scaled by 1 / rope.scaling.factor
  // (ggml's freq_scale). Per-dimension frequency factors (Llama 3.x's
  // rope_freqs.weight) are a tensor: LlamaModel reads them.
  float rope_freq_scale = 1.0f;
  float rms_eps = 1e-5f;

  // Sliding-window attention: a query at position y sees positions > y -
  // sliding_window on the layers Slides() names; 0: none.
  int sliding_window = 0;
  // RoPE of the sliding layers (the global ones' unless the architecture
  // has its own: ArchTraits::swa_rope_base).
  float swa_rope_base = 10000.0f;
  float swa_rope_freq_scale = 1.0f;
  // Q is multiplied by q_scale after RoPE and the scores are not scaled
  // again (Gemma); 0: scores scaled by 1 / sqrt(head_dim).
  float q_scale = 0.0f;
  // Soft-capping, cap * tanh(v / cap), of the attention scores and of the
  // final logits; 0: off.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;

  bool Slides(int layer) const {
    const int p = traits.swa_pattern;
    return sliding_window > 0 && (p <= 1 || layer % p < p - 1);
  }
  // Whether the sliding layers' RoPE differs from the others'.
  bool SwaRopeDiffers() const {
    return sliding_window > 0 && (swa_rope_base != rope_base ||
                                  swa_rope_freq_scale != rope_freq_scale);
  }

  // Multi-stream metadata (docs/MULTISTREAM.md "Model metadata"), from the
  // braid.streams.* keys; without them the model is single-stream:
  // n_streams 1, no roles, aligned, no silence token.
  using StreamLayout = model::StreamLayout;  // (model/model.h)
  int n_streams = 1;                         // braid.streams.count, >= 1.
  std::vector<std::string> stream_roles;     // [n_streams] or empty.
  StreamLayout stream_layout = StreamLayout::kAligned;
  int silence_token_id = -1;  // In [0, n_vocab), or -1 when not given.

  int kv_dim() const { return n_head_kv * head_dim; }

  // Reads `<arch>.*` and `braid.streams.*` keys. n_vocab comes from
  // token_embd.weight's shape. braid.streams.roles (string array of
  // n_streams), .layout ("aligned" | "rows", default aligned) and
  // .silence_token_id (required by rows) need braid.streams.count.
  static absl::StatusOr<LlamaConfig> FromGguf(const GgufFile& file);
};

// What a model loaded from `file` with `config` is, for the API
// (model::ModelInfo), running on `backend` ("cpu", "cuda").
ModelInfo DescribeModel(const LlamaConfig& config, const GgufFile& file,
                        const std::string& backend);

}  // namespace braid::model

#endif  // BRAID_MODEL_MODEL_CONFIG_H_
