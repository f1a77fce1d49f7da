// Causal multi-head attention of one sequence over an fp16 KV cache (GQA
// aware).
//
// Design: one (token, head) pair per task. Scores are computed in chunks of
// kAttentionChunk keys on the stack with an online (running max) softmax, so no
// buffer proportional to the context is needed and nothing is allocated per
// call. Thread-safety: stateless; callers own all buffers.
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
// and
//      attends to cache entries 0..q_positions[t] inclusive (causal mask).
// k,v: [n_ctx, n_kv_head, head_dim] fp16; entries up to max(q_positions) valid.
// out: [n_tok, n_head, head_dim] f32.
// Head h reads kv head h / (n_head / n_kv_head); scores are scaled by
// 1/sqrt(head_dim). Like ggml's F16 K.Q product, the query is rounded to fp16
// before the dot. head_dim <= 256. pool may be null.
void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_ATTENTION_H_
