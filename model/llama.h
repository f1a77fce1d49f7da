// Llama-family forward pass on the CPU kernels, reading weights straight from a
// GGUF mapping.
//
// LlamaModel owns the GgufFile; weight matrices stay quantized in the mmap
// (only the small norm vectors are copied to f32). Forward runs one sequence:
// it appends tokens to that sequence's KvCache and returns logits. Scratch
// buffers are sized for the largest batch seen and reused, so steady-state
// decoding allocates nothing. Thread-safety: Forward mutates scratch state and
// must be called from one thread at a time (the engine thread);
// config()/file()/NewKvCache() are safe from any thread.
#ifndef BRAID_MODEL_LLAMA_H_
#define BRAID_MODEL_LLAMA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "model/gguf.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace braid::model {

struct LoadOptions {
  int num_threads = 0;  // 0 = std::thread::hardware_concurrency().
};

class LlamaModel {
 public:
  // Validates the config and every tensor's presence, type and shape.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(
      std::unique_ptr<GgufFile> file, const LoadOptions& opts);

  const LlamaConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }

  KvCache NewKvCache(int max_tokens) const;

  // Appends `tokens` at positions kv.size() .. kv.size()+n-1 and writes logits:
  // if all_logits, [n, n_vocab] for every token, else [1, n_vocab] for the
  // last. Errors: InvalidArgument (empty input, token id out of range, cache
  // shaped for another model), ResourceExhausted (cache capacity exceeded). On
  // error neither kv nor logits are changed.
  absl::Status Forward(absl::Span<const int32_t> tokens, KvCache& kv,
                       bool all_logits, std::vector<float>* logits);

 private:
  struct Layer {
    std::vector<float> attn_norm;               // [n_embd]
    std::vector<float> ffn_norm;                // [n_embd]
    kernels::cpu::WeightMatrix wq, wk, wv, wo;  // [n_out, n_in] each
    kernels::cpu::WeightMatrix w_gate, w_up;    // [n_ff, n_embd]
    kernels::cpu::WeightMatrix w_down;          // [n_embd, n_ff]
  };

  // Activation buffers for up to `capacity` tokens.
  struct Scratch {
    int capacity = 0;
    std::vector<float> x;         // [n, n_embd] residual stream
    std::vector<float> h;         // [n, n_embd] normed input
    std::vector<float> q;         // [n, n_head * head_dim]
    std::vector<float> k;         // [n, kv_dim]
    std::vector<float> v;         // [n, kv_dim]
    std::vector<float> attn;      // [n, n_head * head_dim]
    std::vector<float> gate;      // [n, n_ff]
    std::vector<float> up;        // [n, n_ff]
    std::vector<int32_t> pos;     // [n]
    std::vector<uint8_t> matmul;  // quantized activations
  };

  LlamaModel(std::unique_ptr<GgufFile> file, LlamaConfig config,
             int num_threads);
  absl::Status BindWeights();
  void EnsureScratch(int n);
  void RunLayer(int il, int n, KvCache& kv);

  std::unique_ptr<GgufFile> file_;
  LlamaConfig config_;
  kernels::cpu::ThreadPool pool_;
  kernels::cpu::WeightMatrix token_embd_;  // [n_vocab, n_embd]
  kernels::cpu::WeightMatrix output_;      // [n_vocab, n_embd]
  std::vector<float> output_norm_;         // [n_embd]
  std::vector<Layer> layers_;
  Scratch scratch_;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_LLAMA_H_
