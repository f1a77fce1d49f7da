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
// fp16 values. False (nothing written) when head_dim is not 64 or 128.
bool ScoresF16Avx512(const uint16_t* const* k_rows, int64_t n,
                     const float* const* q, int g, int64_t head_dim, bool gemm,
                     float* scores, int64_t ld);

// For heads h < g and slots s < min(n, slots): row s of head h's slot sums,
// acc[h * ld_acc + s * head_dim + i] = the fused multiply-adds, in j order
// from +0, of w[h * ldw + j] * V_j[i] over keys j = s (mod slots) — what
// AxpyF16 gives key by key into zeroed rows. Rows s >= n are not written.
// False (nothing written) when head_dim is not 64 or 128.
bool SlotSumsF16Avx512(const uint16_t* const* v_rows, int64_t n, const float* w,
                       int64_t ldw, int g, int64_t head_dim, int64_t slots,
                       float* acc, int64_t ld_acc);

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_ATTENTION_KERNELS_H_
