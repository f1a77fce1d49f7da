// How a CUDA PagedAttention call (attention.h) is laid out over thread
// blocks, decided on the host from bounds the caller gives, never from
// device data: a call captured in a CUDA graph keeps its grid, and a replay
// whose sequences changed (contexts grew) is still computed exactly, only the
// balance of the work may be worse.
//
// Design. A thread block takes one (sequence, KV head) pair, a tile of its
// query rows (a row is a query token times one of the KV head's query heads,
// so the heads of a GQA group share every K and V load) and a slice of its
// context. Decode steps have a few rows per pair, so their blocks have one
// warp of rows and four warps splitting each key tile; prefill chunks have
// many rows, and four warps of rows each see the whole key tile (FlashAttention
// 2). When the pairs and row tiles are too few to fill the GPU, the context
// is split over more blocks (flash-decoding: each computes a partial
// softmax, a combine pass merges them), each split covering at least
// kMinSplitEntries entries. Splits are capped so that split blocks number at
// most kSplitBlocksPerSm per multiprocessor: the partials' workspace then has
// a bound that does not depend on the batch (MaxWorkspaceBytes).
//
// Host only, header only, pure and thread-safe; nvcc includes it too.
#ifndef BRAID_KERNELS_CUDA_ATTENTION_PLAN_H_
#define BRAID_KERNELS_CUDA_ATTENTION_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace braid::kernels::cuda {

// Query rows per thread block of the two tile configurations.
inline constexpr int kDecodeBlockRows = 16;
inline constexpr int kPrefillBlockRows = 64;
// The split blocks of one call number at most this many per multiprocessor.
inline constexpr int kSplitBlocksPerSm = 4;
// A split covers at least this many context entries (bounded by the max
// context given), at most kMaxSplits splits.
inline constexpr int kMinSplitEntries = 256;
inline constexpr int kMaxSplits = 64;

// Into how many slices (>= 1) to split each context of a call whose
// contexts have at most max_ctx entries, when it has work_blocks thread
// blocks before splitting (sequences x KV heads x query-row tiles) on a GPU
// with num_sms multiprocessors. Non-decreasing in max_ctx, non-increasing in
// work_blocks; a result s > 1 has s * work_blocks <= kSplitBlocksPerSm *
// num_sms.
inline int DecodeSplits(int64_t max_ctx, int64_t work_blocks, int num_sms) {
  if (max_ctx <= 0 || work_blocks <= 0 || num_sms <= 0) return 1;
  const int64_t cap = int64_t{kSplitBlocksPerSm} * num_sms;
  int64_t splits = cap / work_blocks;
  splits =
      std::min(splits, (max_ctx + kMinSplitEntries - 1) / kMinSplitEntries);
  splits = std::min<int64_t>(splits, kMaxSplits);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

// A call's launch: grid (q_tiles, n_seq * n_kv_head, splits) of the decode
// or the prefill configuration, block_rows query rows per block.
struct AttentionPlan {
  bool decode = true;
  int block_rows = kDecodeBlockRows;
  int q_tiles = 0;
  int splits = 1;
};

// The plan of a call of n_seq sequences, each with at most max_seq_tokens
// query tokens and max_ctx context entries, group = n_head / n_kv_head.
inline AttentionPlan PlanAttention(int n_seq, int n_kv_head, int group,
                                   int max_seq_tokens, int max_ctx,
                                   int num_sms) {
  AttentionPlan plan;
  const int64_t rows = int64_t{max_seq_tokens} * group;
  plan.decode = rows <= kDecodeBlockRows;
  plan.block_rows = plan.decode ? kDecodeBlockRows : kPrefillBlockRows;
  plan.q_tiles =
      static_cast<int>((rows + plan.block_rows - 1) / plan.block_rows);
  plan.splits =
      DecodeSplits(max_ctx, int64_t{n_seq} * n_kv_head * plan.q_tiles, num_sms);
  return plan;
}

// Query rows of a plan's partial results per split (every block's rows).
inline int64_t PartialRows(const AttentionPlan& plan, int n_seq,
                           int n_kv_head) {
  return int64_t{n_seq} * n_kv_head * plan.q_tiles * plan.block_rows;
}

// Workspace a plan needs: with splits, each split's partial output rows
// ([rows, head_dim] f32) and their log-sum-exps ([rows] f32); none without.
inline size_t PlanWorkspaceBytes(const AttentionPlan& plan, int n_seq,
                                 int n_kv_head, int head_dim) {
  if (plan.splits <= 1) return 0;
  return static_cast<size_t>(plan.splits) *
         static_cast<size_t>(PartialRows(plan, n_seq, n_kv_head)) *
         (static_cast<size_t>(head_dim) + 1) * sizeof(float);
}

// Workspace enough for every plan on a GPU with num_sms multiprocessors:
// split blocks number at most kSplitBlocksPerSm * num_sms, each with at
// most kPrefillBlockRows rows.
inline size_t MaxWorkspaceBytes(int head_dim, int num_sms) {
  return static_cast<size_t>(kSplitBlocksPerSm) * num_sms * kPrefillBlockRows *
         (static_cast<size_t>(head_dim) + 1) * sizeof(float);
}

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_ATTENTION_PLAN_H_
