// What a CUDA paged attention call is given (its shape, one layer of the KV
// pool, the batch's sequences) and the kernels' launch as plain C++: the
// types of attention.h's API, shared with attention.cu, which includes no
// absl. Callers use attention.h; LaunchPagedAttention is internal to
// kernels/cuda (attention.cc validates its inputs and wraps its result).
//
// No CUDA, absl or kernels/cpu headers; compiles with the host compiler and
// with nvcc. Device arrays are plain pointers; `stream` is a cudaStream_t.
#ifndef BRAID_KERNELS_CUDA_ATTENTION_LAUNCH_H_
#define BRAID_KERNELS_CUDA_ATTENTION_LAUNCH_H_

#include <cstdint>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/attention_rule.h"

namespace braid::kernels::cuda {

// Mirrors kernels/cpu's AttentionShape, plus the pool's block size.
struct CudaAttentionShape {
  int n_head = 0;
  int n_kv_head = 0;   // n_head % n_kv_head == 0; head h reads KV head
                       // h / (n_head / n_kv_head).
  int head_dim = 0;    // 64, 128 or 256.
  int block_size = 0;  // Entries per block of the KV pool.
  // A score from the dot d = q.k: with softcap > 0, d = softcap *
  // tanh(d / softcap) (Gemma 2); then d * scale (0: 1 / sqrt(head_dim)).
  float scale = 0.0f;
  // > 0: a query at y sees only entries at y' > y - window.
  int window = 0;
  float softcap = 0.0f;
};

// One layer of the KV pool on the device, in model/cpu/paged_kv.h's layout:
// entry `slot` of block b holds its K row (all KV heads) at
// k + (b * block_size + slot) * n_kv_head * head_dim, V alike, its tag at
// meta[b * block_size + slot] (tags are shared by all layers). 16-byte
// aligned.
struct CudaPagedKvLayer {
  const uint16_t* k =
      nullptr;  // [num_blocks, block_size, n_kv_head, head_dim] fp16
  const uint16_t* v =
      nullptr;  // [num_blocks, block_size, n_kv_head, head_dim] fp16
  const CudaEntryMeta* meta = nullptr;  // [num_blocks, block_size]
};

// One sequence of a call, as kernels/cpu's PagedAttentionSeq: query rows
// [first_token, first_token + num_tokens) and a context of num_ctx entries
// (this step's own tokens included), entry j in block
// block_tables[block_table_offset + j / block_size], slot j % block_size;
// it sees, besides each query's own stream, the streams
// visible[visible_offset, visible_offset + num_visible). Every entry of the
// context must hold finite K and V (masked entries still weigh 0 * V).
struct CudaAttentionSeq {
  int32_t first_token;
  int32_t num_tokens;
  int32_t num_ctx;
  int32_t block_table_offset;
  int32_t visible_offset;
  int32_t num_visible;
};
static_assert(sizeof(CudaAttentionSeq) == 24, "six int32, no padding");

// The sequences of a call: device arrays, and host bounds that fix the
// launch (attention_plan.h), so the same call replays in a CUDA graph while
// the arrays' contents change between replays.
struct CudaAttentionBatch {
  const CudaAttentionSeq* seqs = nullptr;  // [n_seq]
  const int32_t* block_tables = nullptr;   // concatenated block tables
  const int32_t* visible = nullptr;        // concatenated visible streams
  const CudaEntryMeta* q_meta = nullptr;   // [n_tok] (stream, y) per query
  int n_seq = 0;
  // Bounds: every seqs[i].num_tokens <= max_seq_tokens (required: rows
  // beyond it are not computed); num_ctx <= max_ctx (only for balance: a
  // longer context is still computed, by fewer blocks than it could use).
  int max_seq_tokens = 0;
  int max_ctx = 0;
};

namespace internal {

// Launches `plan` (PlanAttention of this batch) on `stream` (a
// cudaStream_t): the tile kernel, then the combine kernel when
// plan.splits > 1 (workspace: PlanWorkspaceBytes, 16-byte aligned).
// Returns the cudaError_t of the launches, as an int. Expects inputs that
// PagedAttention (attention.h) validated.
int LaunchPagedAttention(const CudaAttentionShape& shape,
                         const CudaPagedKvLayer& kv,
                         const CudaAttentionBatch& batch,
                         const AttentionPlan& plan, const float* q, float* out,
                         void* workspace, void* stream);

}  // namespace internal
}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_ATTENTION_LAUNCH_H_
