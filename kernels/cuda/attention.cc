#include "kernels/cuda/attention.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {
namespace {

// The most (sequence, KV head) pairs of a call: the grid's y dimension.
constexpr int64_t kMaxPairs = 65535;

bool Aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

absl::Status CheckShape(const CudaAttentionShape& s) {
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: head_dim ", s.head_dim, " (64, 128 or 256)"));
  }
  if (s.n_head <= 0 || s.n_kv_head <= 0 || s.n_head % s.n_kv_head != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: n_head ", s.n_head, ", n_kv_head ",
                     s.n_kv_head, " (a positive multiple)"));
  }
  if (s.block_size <= 0 || s.window < 0 || s.softcap < 0.0f || s.scale < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: block_size ", s.block_size, ", window ",
                     s.window, ", softcap ", s.softcap, ", scale ", s.scale));
  }
  return absl::OkStatus();
}

absl::Status CheckArrays(const CudaPagedKvLayer& kv,
                         const CudaAttentionBatch& batch, const float* q,
                         const float* out) {
  if (kv.k == nullptr || kv.v == nullptr || kv.meta == nullptr ||
      batch.seqs == nullptr || batch.block_tables == nullptr ||
      batch.q_meta == nullptr || q == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("PagedAttention: a null device array");
  }
  if (!Aligned(kv.k, 16) || !Aligned(kv.v, 16) || !Aligned(q, 8) ||
      !Aligned(out, 16)) {
    return absl::InvalidArgumentError(
        "PagedAttention: K and V must be 16-byte aligned, q 8, out 16");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PagedAttention(const CudaAttentionShape& shape,
                            const CudaPagedKvLayer& kv,
                            const CudaAttentionBatch& batch, const float* q,
                            float* out, void* workspace, size_t workspace_bytes,
                            void* stream) {
  if (absl::Status st = CheckShape(shape); !st.ok()) return st;
  if (batch.n_seq < 0 || batch.max_seq_tokens < 0 || batch.max_ctx < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: n_seq ", batch.n_seq, ", max_seq_tokens ",
                     batch.max_seq_tokens, ", max_ctx ", batch.max_ctx));
  }
  if (batch.n_seq == 0 || batch.max_seq_tokens == 0) return absl::OkStatus();
  if (absl::Status st = CheckArrays(kv, batch, q, out); !st.ok()) return st;
  if (int64_t{batch.n_seq} * shape.n_kv_head > kMaxPairs) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: ", batch.n_seq, " sequences x ",
                     shape.n_kv_head, " KV heads > ", kMaxPairs));
  }
  int device = 0, num_sms = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  const AttentionPlan plan = PlanAttention(
      batch.n_seq, shape.n_kv_head, shape.n_head / shape.n_kv_head,
      batch.max_seq_tokens, batch.max_ctx, num_sms);
  const size_t need =
      PlanWorkspaceBytes(plan, batch.n_seq, shape.n_kv_head, shape.head_dim);
  if (workspace_bytes < need ||
      (need > 0 && (workspace == nullptr || !Aligned(workspace, 16)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: workspace of ", workspace_bytes, " bytes at ",
        reinterpret_cast<uintptr_t>(workspace), ", the call needs ", need,
        " (16-byte aligned; AttentionWorkspaceBytes)"));
  }
  BRAID_CUDA_RETURN_IF_ERROR(
      static_cast<cudaError_t>(internal::LaunchPagedAttention(
          shape, kv, batch, plan, q, out, workspace, stream)));
  return absl::OkStatus();
}

}  // namespace braid::kernels::cuda
