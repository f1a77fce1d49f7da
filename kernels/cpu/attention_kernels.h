// The two products inside attention (attention.cc), for the query heads that
// share one KV head, over K and V rows given by pointer (the visible entries
// of a paged context in rank order). Internal to kernels/cpu; pure and
// thread-safe.
#ifndef BRAID_KERNELS_CPU_ATTENTION_KERNELS_H_
#define BRAID_KERNELS_CPU_ATTENTION_KERNELS_H_

#include <cstdint>

namespace braid::kernels::cpu::internal {

// scores[h * ld + j] = DotF16F32Gemm (gemm) or DotF16F32Vec (k_rows[j], q[h],
// head_dim), bit for bit (dot.h), for heads h < g and keys j < n. q rows hold
// fp16 values. v_rows (may be null) are only prefetched, for the weighted
// sum that follows. False (nothing written) when head_dim is not 64 or 128.
bool ScoresF16Avx512(const uint16_t* const* k_rows,
                     const uint16_t* const* v_rows, int64_t n,
                     const float* const* q, int g, int64_t head_dim, bool gemm,
                     float* scores, int64_t ld);

// out[h][i] for heads h < g, i < head_dim: the weighted V sum
// sum_j w[h * ldw + j] * V_j[i] over keys j < n as ggml sums it with `slots`
// accumulator lanes (16 or 64): slot s accumulates, in key order and one
// fused multiply-add per element from +0, the keys j = s (mod slots), and the
// slots are added in ReduceSlots' order (attention.cc) — the bits of
// AxpyF16 key by key into zeroed slot rows followed by ReduceSlots. False
// (nothing written) for other slot counts or head_dim not a multiple of 16
// up to 256.
bool WeightedSumF16Avx512(const uint16_t* const* v_rows, int64_t n,
                          const float* w, int64_t ldw, int g, int64_t head_dim,
                          int64_t slots, float* const* out);

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_ATTENTION_KERNELS_H_
