// The two products inside attention (attention.cc), for the query heads that
// share one KV head, over K and V rows given by pointer (the visible entries
// of a paged context in rank order). Internal to kernels/cpu; pure and
// thread-safe.
#ifndef BRAID_KERNELS_CPU_ATTENTION_ATTENTION_KERNELS_H_
#define BRAID_KERNELS_CPU_ATTENTION_ATTENTION_KERNELS_H_

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

// ScoresF16Avx512's scores with AVX2 (without the V rows' prefetch); false
// (nothing written) when head_dim is not 64 or 128 or g > kMaxRows.
bool ScoresF16Avx2(const uint16_t* const* k_rows, int64_t n,
                   const float* const* q, int g, int64_t head_dim, bool gemm,
                   float* scores, int64_t ld);

// WeightedSumF16Avx512's sums with AVX2 (8 dims a pass), the same bits;
// false (nothing written) for other slot counts or head_dim not a multiple
// of 8 up to 256.
bool WeightedSumF16Avx2(const uint16_t* const* v_rows, int64_t n,
                        const float* w, int64_t ldw, int g, int64_t head_dim,
                        int64_t slots, float* const* out);

// The same sums split by residue: for residues r in [r0, r1) of the slots
// modulo 8, res[h * 8 * head_dim + r * head_dim + i] = the slots r, r + 8,
// ... combined as ReduceSlots' first levels combine them; CombineResidues
// then gives WeightedSumF16Avx512's out[h] bit for bit. False (nothing
// written) where WeightedSumF16Avx512 is.
bool ResidueSumsF16Avx512(const uint16_t* const* v_rows, int64_t n,
                          const float* w, int64_t ldw, int g, int64_t head_dim,
                          int64_t slots, int r0, int r1, float* res);

// Sizes this thread's buffer of the weighted sums' weights (laid out by
// residue) for contexts of up to max_ctx entries (ReserveAttentionScratch).
void ReserveResidueWeights(int64_t max_ctx);

// SoftmaxRow (attention_paged.h) in three passes of 16 lanes (scale and
// maximum; ExpShiftedSum; the weights rounded to fp16 and the rest of the
// row zeroed), the same operations per element, so the same bits.
void SoftmaxRowAvx512(float* row, int64_t n, int64_t ld, float scale);

// Calls of PagedAttention that took the split phases for long one-token
// sequences, since start (testing).
int64_t LongSplitCallsForTesting();

// out[i] = ((res0 + res4) + (res2 + res6)) + ((res1 + res5) + (res3 + res7))
// at element i, res_r = res[r * dim + i] (ggml's lane tree over residues).
inline void CombineResidues(const float* res, int64_t dim, float* out) {
  for (int64_t i = 0; i < dim; ++i) {
    const float d0 = res[0 * dim + i] + res[4 * dim + i];
    const float d1 = res[1 * dim + i] + res[5 * dim + i];
    const float d2 = res[2 * dim + i] + res[6 * dim + i];
    const float d3 = res[3 * dim + i] + res[7 * dim + i];
    out[i] = (d0 + d2) + (d1 + d3);
  }
}

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_ATTENTION_ATTENTION_KERNELS_H_
