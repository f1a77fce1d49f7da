// What PagedAttention (attention.cc) shares with its long-context phases
// (attention_long.cc): the task shape constants, which of llama.cpp's
// kernels a product follows, the softmax, and a paged layer's entries as a
// call addresses them. Internal to kernels/cpu.
#ifndef BRAID_KERNELS_CPU_ATTENTION_ATTENTION_PAGED_H_
#define BRAID_KERNELS_CPU_ATTENTION_ATTENTION_PAGED_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu::internal {

inline constexpr int64_t kLanes = 16;  // ggml's AVX-512 vector width in floats.
// Query rows (heads x tokens) handled by one task, sharing K and V rows.
inline constexpr int kMaxRows = 24;

// Which of llama.cpp's kernels computes each product (see dot.h).
struct KernelChoice {
  bool kq_gemm;   // K·q in tinyBLAS (else ggml_vec_dot_f16)
  bool kqv_gemm;  // V^T·weights in tinyBLAS (else ggml_vec_dot_f16)
};

// tinyBLAS only serves batches of 2+ and declines a K·q whose inner size
// (head_dim) is not a multiple of its 16 lanes or a V^T·w with head_dim rows
// not a multiple of 4; llama.cpp then falls back to ggml_vec_dot_f16.
inline KernelChoice ChooseKernels(int64_t n_tok, int64_t head_dim) {
  return KernelChoice{n_tok > 1 && head_dim % kLanes == 0,
                      n_tok > 1 && head_dim % 4 == 0};
}

// A score row of n dots (ld >= pad16(n) floats) -> ggml's softmax weights of
// scale * dots, rounded to fp16 as ggml stores them; the rest of the row 0.
void SoftmaxRow(float* row, int64_t n, int64_t ld, float scale);
// The scores' scale of `shape` (AttentionShape::scale, or 1 / sqrt(head_dim)).
float ScoreScale(const AttentionShape& shape);

// A paged layer's entries as one call addresses them: the pool entry of a
// sequence's context entry j (shifts for the usual power-of-two block
// sizes), its tag, and its K and V rows of a KV head.
class PagedEntries {
 public:
  PagedEntries(const AttentionShape& shape, const PagedKvLayer& kv)
      : kv_(kv),
        kv_stride_(shape.n_kv_head * shape.head_dim),
        head_dim_(shape.head_dim) {
    const int64_t bs = kv.block_size;
    if ((bs & (bs - 1)) == 0) {
      shift_ = __builtin_ctzll(static_cast<uint64_t>(bs));
    }
  }
  int64_t Slot(const PagedAttentionSeq& seq, int64_t j) const {
    const int32_t* table = seq.block_table;
    const int64_t bs = kv_.block_size;
    if (shift_ >= 0) {
      return (int64_t{table[j >> shift_]} << shift_) | (j & (bs - 1));
    }
    return table[j / bs] * bs + j % bs;
  }
  // Entry e (context index j): its tag, or (0, j) without tags.
  KvEntryMeta Meta(int64_t e, int64_t j) const {
    return kv_.meta != nullptr ? kv_.meta[e]
                               : KvEntryMeta{0, static_cast<int32_t>(j)};
  }
  const uint16_t* K(int64_t e, int64_t kv_head) const {
    return kv_.k + e * kv_stride_ + kv_head * head_dim_;
  }
  const uint16_t* V(int64_t e, int64_t kv_head) const {
    return kv_.v + e * kv_stride_ + kv_head * head_dim_;
  }

 private:
  const PagedKvLayer kv_;
  int64_t kv_stride_, head_dim_;
  int shift_ = -1;
};

// Long one-token queries of a PagedAttention call: the tokens t < n_tok
// with is_long(t) (none: returns at once), in four parallel phases over
// (token, KV head): scores by key ranges, softmax per head, weighted V sums
// by residue of the slots, the residues' final tree per head, each computed
// as the one-task path computes it, so the bits are the same; the work of
// one query spreads over the pool and each K and V row is read once for the
// KV head's query heads. Needs AVX-512, head_dim 64 or 128 and at most
// kMaxRows query heads per KV head.
void LongContextAttention(const AttentionShape& shape,
                          const PagedEntries& entries, const float* q,
                          const KvEntryMeta* q_meta,
                          const PagedAttentionSeq* seqs,
                          const int32_t* token_seq, int64_t n_tok,
                          absl::FunctionRef<bool(int64_t)> is_long, float scale,
                          float* out, ThreadPool* pool);

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_ATTENTION_ATTENTION_PAGED_H_
