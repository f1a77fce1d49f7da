// The Llama-family block's element-wise and row-wise ops on the GPU: what
// cuBLASLt's epilogues lack, each fused so that a product's output is read
// once (the CODA idea; gemm.h has the products). Each is a kernel launch on
// `stream`, asynchronous, allocation-free and graph-capturable; results as
// cudaError_t (wrap with BRAID_CUDA_RETURN_IF_ERROR, kernels/cuda/status.h).
// BF16 and FP16 values travel as their bits (uint16_t). The CPU ops
// (kernels/cpu/ops.h) are the oracle: ops_gpu_test compares every op.
#ifndef BRAID_KERNELS_CUDA_OPS_H_
#define BRAID_KERNELS_CUDA_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/attention_rule.h"

namespace braid::kernels::cuda {

// x[t] = scale * table[tokens[t]] (+ stream_embd[meta[t].stream] when not
// null), f32. table: [n_vocab, d] BF16; stream_embd: [n_streams, d] f32;
// x: [n, d].
cudaError_t EmbedRows(const uint16_t* table, const int32_t* tokens,
                      const CudaEntryMeta* meta, const float* stream_embd,
                      int n, int d, float scale, float* x, cudaStream_t stream);

// out[i] = x[r] / sqrt(mean(x[r]^2) + eps) * w for r = rows[i] (rows null:
// r = i), i < n; x rows ld_x apart, out rows d apart. ..ToBf16 rounds to
// BF16 (the next product's input); ..F32 may write in place (out == x,
// rows null, ld_x == d).
cudaError_t RmsNormToBf16(const float* x, int ld_x, const int32_t* rows, int n,
                          int d, const float* w, float eps, uint16_t* out,
                          cudaStream_t stream);
cudaError_t RmsNormF32(const float* x, int ld_x, const int32_t* rows, int n,
                       int d, const float* w, float eps, float* out,
                       cudaStream_t stream);

// x[t] += RmsNorm(o[t]) * w (Gemma's post-attention and post-FFN norms
// before the residual add). o, x: [n, d].
cudaError_t PostNormAdd(const float* o, const float* w, float eps, int n, int d,
                        float* x, cudaStream_t stream);

// The gated FFN's activation: out[t, i] = act(gu[t, i]) * gu[t, ff + i]
// (one product wrote [gate | up] rows of 2 * ff), rounded to BF16 for the
// down product. SiLU as kernels/cpu's SiluMul; GELU-tanh as its GeluTanhMul
// (the fp16 value of GELU of the fp16 input, x itself from 10 on, 0 at or
// below -10).
enum class GatedAct { kSilu, kGeluTanh };
cudaError_t GatedActToBf16(const float* gu, int n, int ff, GatedAct act,
                           uint16_t* out, cudaStream_t stream);

// RoPE's angles as kernels/cpu's RopeTable: theta of pair i is y *
// theta_scale^i (successive float products), / freq_factors[i] when given,
// * freq_scale.
struct RopeParams {
  int n_rot = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // device [n_rot / 2] or null
};

// cs[t, 2i] = cos(theta_i), cs[t, 2i + 1] = sin(theta_i) at y = meta[t].y,
// for i < n_rot / 2: once a step for all layers and heads. cs: [n, n_rot].
cudaError_t RopeTable(const CudaEntryMeta* meta, int n, const RopeParams& rope,
                      float* cs, cudaStream_t stream);

// A step's rotation: its RopeTable and the mode (kernels/cpu's RopeApply,
// or RopeApplyNeox).
struct RopeRotation {
  bool neox = false;
  int n_rot = 0;
  const float* cs = nullptr;  // [n, n_rot]
};

// The Q/K/V product's epilogue, one pass over its output qkv [n, q_dim +
// 2 * kv_dim] (bias already added by the product): per-head RMSNorm of Q
// and K with q_norm / k_norm ([head_dim] each, or null), the rotation on Q
// and K, Q times q_scale into q [n, q_dim] (f32, attention's input), K and
// V rounded to fp16 into the pool's slot slots[t] of this layer (k_pool,
// v_pool: [slots, kv_dim]).
struct QkvShape {
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  float norm_eps = 1e-6f;
};
cudaError_t QkvEpilogue(const float* qkv, int n, const QkvShape& shape,
                        const float* q_norm, const float* k_norm,
                        const RopeRotation& rope, float q_scale,
                        const int64_t* slots, float* q, uint16_t* k_pool,
                        uint16_t* v_pool, cudaStream_t stream);

// kv_meta[slots[t]] = meta[t] for t < n (the entries' tags, shared by all
// layers).
cudaError_t WriteKvMeta(const CudaEntryMeta* meta, const int64_t* slots, int n,
                        CudaEntryMeta* kv_meta, cudaStream_t stream);

// x[i] = cap * tanh(x[i] / cap), i < n (Gemma 2's final logits).
cudaError_t Softcap(float* x, int64_t n, float cap, cudaStream_t stream);

// out[i] = BF16(x[i]), i < n.
// Sampling penalties of logits rows in place, as model::ApplyPenalties (the
// oracle): row r's entries [begin, end) of `entries`, each a distinct id of
// the row; repetition != 1 divides a positive logit by it and multiplies
// the others; an entry with output_count > 0 then loses frequency *
// output_count + presence (no fused multiply-add, as the host computes it);
// ids outside [0, n_vocab) are left. logits: [n_rows, n_vocab].
struct CudaRowPenalties {
  float repetition, frequency, presence;
  int32_t begin, end;
};
struct CudaPenaltyEntry {
  int32_t id, output_count;
};
cudaError_t ApplyPenalties(float* logits, int n_rows, int n_vocab,
                           const CudaRowPenalties* rows,
                           const CudaPenaltyEntry* entries,
                           cudaStream_t stream);

cudaError_t F32ToBf16(const float* x, int64_t n, uint16_t* out,
                      cudaStream_t stream);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_OPS_H_
