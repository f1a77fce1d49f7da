// What the CUDA model (model/cuda/cuda_model.h) allocates for a model, worked
// out on the host before any device call: the fused weight matrices and
// their bytes, the products' shapes (cuBLASLt plans), the activation arena
// for a step of up to max_tokens tokens, a KV block's bytes and how many
// blocks a share of the free device memory holds. Plain values; no CUDA.
//
// Layout: per layer Q, K and V are one [q_dim + 2 kv_dim, n_embd] BF16
// matrix (one product, one epilogue pass), gate and up one [2 n_ff, n_embd]
// (the gated activation reads [gate | up] rows), O [n_embd, q_dim] and down
// [n_embd, n_ff]; the embedding table is BF16 [n_vocab, n_embd] and serves
// as the output projection when the file ties them.
#ifndef BRAID_MODEL_CUDA_CUDA_PLAN_H_
#define BRAID_MODEL_CUDA_CUDA_PLAN_H_

#include <cstdint>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "model/model_config.h"

namespace braid::model {

// The products of a step, indices into CudaPlan::shapes.
enum CudaProduct {
  kQkvProduct,
  kOutProduct,
  kGateUpProduct,
  kDownProduct,
  kVocabProduct,
  kNumCudaProducts
};

// The activation buffers of a step, offsets into one device arena.
enum CudaBuffer {
  kX,           // f32 [T, n_embd] residual stream
  kH,           // BF16 [T, n_embd] normed input of a product
  kQkv,         // f32 [T, q_dim + 2 kv_dim]
  kQ,           // f32 [T, q_dim] attention's queries
  kAttn,        // f32 [T, q_dim] attention's output
  kAttnBf16,    // BF16 [T, q_dim] the O product's input
  kGateUp,      // f32 [T, 2 n_ff]
  kAct,         // BF16 [T, n_ff] the down product's input
  kO,           // f32 [T, n_embd] a product's output before a post-norm (gemma)
  kLogits,      // f32 [T, n_vocab]
  kRope,        // f32 [T, n_rot] the step's RoPE table (cos, sin per pair)
  kRopeSwa,     // f32 [T, n_rot] the sliding layers' table (gemma3)
  kTopIds,      // int32 [T, kMaxTopLogits] the logits rows reduced (ForwardTop)
  kTopValues,   // f32 [T, kMaxTopLogits]
  kLogZ,        // f32 [T]
  kDraws,       // kernels::cuda::CudaRowDraw [T] the rows' draws (ForwardTop)
  kDrawn,       // int32 [T]
  kDrawnLogit,  // f32 [T]
  kDrawSums,    // f64 [T] the rows' softmax denominators (a nucleus's)
  kNumCudaBuffers
};

struct CudaPlan {
  int n_layer = 0, n_embd = 0, n_vocab = 0, n_ff = 0;
  int q_dim = 0, kv_dim = 0;
  int qkv_rows() const { return q_dim + 2 * kv_dim; }
  bool tied_output = false;
  int max_tokens = 0;
  // [kNumCudaProducts]; the Q/K/V product has the bias epilogue when the
  // architecture has biases, O and down add into the residual stream unless
  // a post-norm comes between (gemma).
  std::vector<kernels::cuda::GemmShape> shapes;
  // BF16 elements of one layer's matrices, of the embedding table and of the
  // output projection (0 when tied).
  int64_t layer_weight_elements = 0;
  int64_t embd_elements = 0;
  int64_t output_elements = 0;
  // Byte offsets of the buffers in the activation arena (256-byte aligned)
  // and its size.
  int64_t buffer_offset[kNumCudaBuffers] = {};
  int64_t arena_bytes = 0;

  int64_t WeightBytes() const {
    return 2 *
           (n_layer * layer_weight_elements + embd_elements + output_elements);
  }
};

// The plan of `config` for steps of up to max_tokens (>= 1) tokens.
CudaPlan PlanCudaModel(const LlamaConfig& config, bool tied_output,
                       int max_tokens);

// Bytes of one KV block: fp16 K and V of every layer and the entries'
// (stream, y) tags.
int64_t CudaKvBlockBytes(const LlamaConfig& config, int block_size);

// Blocks of block_bytes that fit in fraction (0, 1] of free_bytes, less
// reserve_bytes (what the step still allocates); 0 when none.
int CudaKvBlocksFor(int64_t free_bytes, double fraction, int64_t reserve_bytes,
                    int64_t block_bytes);

}  // namespace braid::model

#endif  // BRAID_MODEL_CUDA_CUDA_PLAN_H_
