#include "model/cuda/cuda_plan.h"

#include <algorithm>

#include "model/top_logits.h"

namespace braid::model {

namespace k = ::braid::kernels::cuda;

namespace {
constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

CudaPlan PlanCudaModel(const LlamaConfig& c, bool tied_output, int max_tokens) {
  CudaPlan p;
  p.n_layer = c.n_layer;
  p.n_embd = c.n_embd;
  p.n_vocab = c.n_vocab;
  p.n_ff = c.n_ff;
  p.q_dim = c.n_head * c.head_dim;
  p.kv_dim = c.kv_dim();
  p.tied_output = tied_output;
  p.max_tokens = max_tokens;
  const bool post_norms = c.traits.gemma;
  const k::GemmEpilogue residual =
      post_norms ? k::GemmEpilogue::kNone : k::GemmEpilogue::kResidual;
  p.shapes.resize(kNumCudaProducts);
  p.shapes[kQkvProduct] = {
      p.qkv_rows(), c.n_embd,
      c.traits.qkv_bias ? k::GemmEpilogue::kBias : k::GemmEpilogue::kNone};
  p.shapes[kOutProduct] = {c.n_embd, p.q_dim, residual};
  p.shapes[kGateUpProduct] = {2 * c.n_ff, c.n_embd, k::GemmEpilogue::kNone};
  p.shapes[kDownProduct] = {c.n_embd, c.n_ff, residual};
  p.shapes[kVocabProduct] = {c.n_vocab, c.n_embd, k::GemmEpilogue::kNone};
  p.layer_weight_elements =
      int64_t{p.qkv_rows()} * c.n_embd + int64_t{c.n_embd} * p.q_dim +
      int64_t{2} * c.n_ff * c.n_embd + int64_t{c.n_embd} * c.n_ff;
  p.embd_elements = int64_t{c.n_vocab} * c.n_embd;
  p.output_elements = tied_output ? 0 : p.embd_elements;

  const int64_t t = max_tokens;
  const int64_t bytes[kNumCudaBuffers] = {
      4 * t * c.n_embd,
      2 * t * c.n_embd,
      4 * t * p.qkv_rows(),
      4 * t * p.q_dim,
      4 * t * p.q_dim,
      2 * t * p.q_dim,
      4 * t * 2 * c.n_ff,
      2 * t * c.n_ff,
      4 * t * c.n_embd,
      4 * t * c.n_vocab,
      4 * t * c.n_rot,
      4 * t * c.n_rot,
      4 * t * kMaxTopLogits,
      4 * t * kMaxTopLogits,
      4 * t,
      16 * t,
      4 * t,
      4 * t,
      8 * t,
  };
  int64_t off = 0;
  for (int b = 0; b < kNumCudaBuffers; ++b) {
    p.buffer_offset[b] = off;
    off = AlignUp(off + bytes[b]);
  }
  p.arena_bytes = off;
  return p;
}

int64_t CudaKvBlockBytes(const LlamaConfig& c, int block_size) {
  return int64_t{block_size} *
         (int64_t{2} * c.n_layer * c.kv_dim() * 2 + 2 * sizeof(int32_t));
}

int CudaKvBlocksFor(int64_t free_bytes, double fraction, int64_t reserve_bytes,
                    int64_t block_bytes) {
  if (block_bytes <= 0 || fraction <= 0.0) return 0;
  const int64_t budget =
      static_cast<int64_t>(free_bytes * std::min(fraction, 1.0)) -
      reserve_bytes;
  if (budget < block_bytes) return 0;
  return static_cast<int>(std::min<int64_t>(budget / block_bytes, 1 << 30));
}

}  // namespace braid::model
