#include "kernels/cuda/topk.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {
namespace internal {

// Defined in topk.cu: enqueues the kernel (arguments already checked,
// n_rows > 0, k <= kMaxTopK) and returns the launch's error. Declared here
// rather than in a header because nvcc does not compile topk.h's absl
// include.
cudaError_t LaunchTopKLogits(const float* logits, int n_rows, int n_vocab,
                             int k, int32_t* ids, float* values, float* log_z,
                             cudaStream_t stream);

}  // namespace internal

absl::Status TopKLogits(const float* logits, int n_rows, int n_vocab, int k,
                        int32_t* ids, float* values, float* log_z,
                        cudaStream_t stream) {
  if (n_rows < 0 || n_vocab < 1 || k < 1 || k > std::min(n_vocab, kMaxTopK)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TopKLogits: ", n_rows, " rows of ", n_vocab, " logits, k = ", k,
        " (want n_rows >= 0, n_vocab >= 1, 1 <= k <= min(n_vocab, ", kMaxTopK,
        "))"));
  }
  if (logits == nullptr || ids == nullptr || values == nullptr ||
      log_z == nullptr) {
    return absl::InvalidArgumentError(
        "TopKLogits: null logits, ids, values or log_z array");
  }
  if (n_rows == 0) return absl::OkStatus();
  return CudaStatus(internal::LaunchTopKLogits(logits, n_rows, n_vocab, k, ids,
                                               values, log_z, stream),
                    "TopKLogits kernel launch");
}

}  // namespace braid::kernels::cuda
