// CUDA runtime and cuBLAS(Lt) results as absl::Status: every call into CUDA
// inside kernels/cuda and model/cuda goes through these, so nothing above
// them sees an error code (docs/ARCHITECTURE.md "Errors").
#ifndef BRAID_KERNELS_CUDA_STATUS_H_
#define BRAID_KERNELS_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace braid::kernels::cuda {

// OK for cudaSuccess; else a status naming `what` and the runtime's error:
// ResourceExhausted for an allocation that failed, FailedPrecondition for no
// device or an unusable driver, Internal for the rest (a kernel fault or a
// bad launch is a bug here, not the caller's input).
absl::Status CudaStatus(cudaError_t err, const char* what);
// The same for cuBLAS / cuBLASLt (they share cublasStatus_t).
absl::Status CublasStatus(cublasStatus_t status, const char* what);

}  // namespace braid::kernels::cuda

// Returns from the enclosing function (absl::Status or StatusOr) when `expr`
// (a cudaError_t) fails.
#define BRAID_CUDA_RETURN_IF_ERROR(expr)                                 \
  do {                                                                   \
    const cudaError_t braid_cuda_err_ = (expr);                          \
    if (braid_cuda_err_ != cudaSuccess) {                                \
      return ::braid::kernels::cuda::CudaStatus(braid_cuda_err_, #expr); \
    }                                                                    \
  } while (0)

#define BRAID_CUBLAS_RETURN_IF_ERROR(expr)                                  \
  do {                                                                      \
    const cublasStatus_t braid_cublas_st_ = (expr);                         \
    if (braid_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                        \
      return ::braid::kernels::cuda::CublasStatus(braid_cublas_st_, #expr); \
    }                                                                       \
  } while (0)

#endif  // BRAID_KERNELS_CUDA_STATUS_H_
