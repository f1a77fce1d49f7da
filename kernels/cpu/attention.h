// Causal multi-head attention of one sequence over an fp16 KV cache (GQA
// aware), computed the way llama.cpp's CPU backend computes it without flash
// attention.
//
// Design: one (token, head) pair per task. llama.cpp builds attention from
// separate ops: kq = K·q with q rounded to fp16, softmax(kq * scale + mask)
// with ggml's exp and a double sum, the weights rounded to fp16, then
// V^T·weights. Each matmul runs in ggml_vec_dot_f16 for a one-token batch and
// in llamafile's tinyBLAS for larger batches, and the two sum in different
// orders. Small models amplify those last-bit differences over many layers
// (SmolLM2-135M: logits cosine 0.98 against llama.cpp with an online softmax),
// so this kernel mirrors each op's summation order (dot.h, vec_math.h): the
// score row is materialised (ggml's padding to 16 lanes is implicit, masked
// entries weigh exactly 0), and the weighted V sum keeps one partial row per
// accumulator lane of the matching ggml kernel before reducing them in its
// order. Thread-safety: stateless apart from per-thread scratch; callers own
// all buffers.
#ifndef BRAID_KERNELS_CPU_ATTENTION_H_
#define BRAID_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // n_head % n_kv_head == 0.
  int64_t head_dim = 0;
};

// q:   [n_tok, n_head, head_dim] f32; query t sits at position q_positions[t]
//      and attends to cache entries 0..q_positions[t] inclusive (causal mask).
// k,v: [n_ctx, n_kv_head, head_dim] fp16; entries up to max(q_positions) valid.
// out: [n_tok, n_head, head_dim] f32.
// Head h reads kv head h / (n_head / n_kv_head); scores are scaled by
// 1/sqrt(head_dim). n_tok selects llama.cpp's kernel choice: results for a
// query depend on whether it was evaluated alone (n_tok == 1) or in a batch,
// exactly as in llama.cpp. head_dim <= 256. pool may be null.
void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_ATTENTION_H_
