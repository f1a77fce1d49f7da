// Paged attention of many sequences on the GPU under braid's visibility
// rule (docs/MULTISTREAM.md): the CUDA counterpart of kernels/cpu's
// PagedAttention, over the same pool layout and entry tags, so the engine's
// block tables apply unchanged. kernels/cpu is the oracle
// (attention_gpu_test compares them).
//
// Design. One kernel over thread blocks of (query-row tile, sequence x KV
// head, context split) (attention_plan.h has how the grid is chosen): a
// query row is a token times one query head of the block's KV head, so a
// GQA group's heads share every K and V load. Each block walks its context
// slice in tiles of entries gathered through the block table into shared
// memory (cp.async), evaluates the rule per (row, entry) from the tags
// (attention_rule.h; this masks causality too), computes scores and the
// weighted V sum on tensor cores (fp16 inputs as kernels/cpu rounds them,
// fp32 sums) with an online softmax, and skips tiles whose positions no row
// can see. Decode-sized calls put one warp's 16 rows in a block and split
// each key tile over four warps; prefill calls put 64 rows in four warps
// that each see the whole tile (FlashAttention 2). Few blocks over long
// contexts split the context (flash-decoding); a combine kernel merges the
// partial softmaxes. Results match kernels/cpu to rounding (not bit for bit:
// the summation order differs).
//
// Every call is asynchronous on its stream, allocates nothing, never
// synchronises and reads no device data on the host: it can be captured in
// a CUDA graph and replayed with new contents in the same arrays.
// Stateless and thread-safe.
#ifndef BRAID_KERNELS_CUDA_ATTENTION_H_
#define BRAID_KERNELS_CUDA_ATTENTION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_plan.h"

namespace braid::kernels::cuda {

// q:   [n_tok, n_head, head_dim] f32 (8-byte aligned); query t is tagged
//      batch.q_meta[t].
// out: [n_tok, n_head, head_dim] f32 (16-byte aligned); the rows of the
//      batch's sequences are written, others left as they were.
// Query (s, y) of a sequence attends to its context entries (s', y') with
// (s' == s and y' <= y) or (s' in the sequence's visible streams and
// y' < y), and y - y' < shape.window when there is a window; a query that
// sees nothing gets zeros (the engine's queries always see themselves).
// workspace: device memory of at least AttentionWorkspaceBytes(shape,
// multiprocessors of the current device) bytes, 16-byte aligned, used for
// the partial results of split contexts; may be null when that is 0 or the
// call needs none. stream: a cudaStream_t (null: the default stream).
// InvalidArgument for an unsupported shape (head_dim other than 64, 128,
// 256; n_head not a multiple of n_kv_head), null or misaligned arrays, more
// than 65535 (sequence, KV head) pairs or too small a workspace; a launch
// failure as kernels/cuda/status.h maps it.
absl::Status PagedAttention(const CudaAttentionShape& shape,
                            const CudaPagedKvLayer& kv,
                            const CudaAttentionBatch& batch, const float* q,
                            float* out, void* workspace, size_t workspace_bytes,
                            void* stream);

// Workspace bytes every PagedAttention call of this shape needs at most on a
// GPU of num_sms multiprocessors (cudaDevAttrMultiProcessorCount), whatever
// its batch: allocate once, at load.
inline size_t AttentionWorkspaceBytes(const CudaAttentionShape& shape,
                                      int num_sms) {
  return MaxWorkspaceBytes(shape.head_dim, num_sms);
}

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_ATTENTION_H_
