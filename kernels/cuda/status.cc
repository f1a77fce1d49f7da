#include "kernels/cuda/status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace braid::kernels::cuda {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                 cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNoKernelImageForDevice:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status CublasStatus(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", cublasLtGetStatusName(status),
                                 " (", cublasLtGetStatusString(status), ")");
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(msg);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace braid::kernels::cuda
