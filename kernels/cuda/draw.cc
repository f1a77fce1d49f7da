#include "kernels/cuda/draw.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {
namespace internal {

// Defined in draw.cu (nvcc does not compile draw.h's absl include).
cudaError_t LaunchDrawRows(const float* logits, int n_rows, int n_vocab,
                           const CudaRowDraw* draws, int32_t* drawn,
                           float* drawn_logit, double* sums,
                           cudaStream_t stream);

}  // namespace internal

absl::Status DrawRows(const float* logits, int n_rows, int n_vocab,
                      const CudaRowDraw* draws, int32_t* drawn,
                      float* drawn_logit, double* sums, cudaStream_t stream) {
  if (n_rows < 0 || n_vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DrawRows: ", n_rows, " rows of ", n_vocab, " logits"));
  }
  if (logits == nullptr || draws == nullptr || drawn == nullptr ||
      drawn_logit == nullptr || sums == nullptr) {
    return absl::InvalidArgumentError("DrawRows: a null array");
  }
  if (n_rows == 0) return absl::OkStatus();
  return CudaStatus(internal::LaunchDrawRows(logits, n_rows, n_vocab, draws,
                                             drawn, drawn_logit, sums, stream),
                    "DrawRows kernel launch");
}

}  // namespace braid::kernels::cuda
