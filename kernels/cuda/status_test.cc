// Error mapping of kernels/cuda/status.h and the out-of-memory message; runs
// on the host (the runtime's error names need no device).
#include "kernels/cuda/status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_memory.h"

namespace braid::kernels::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaStatusTest, MapsRuntimeErrorsToCodes) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(kv)");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(oom.message(), HasSubstr("cudaMalloc(kv)"));
  EXPECT_THAT(oom.message(), HasSubstr("cudaErrorMemoryAllocation"));
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "probe").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus(cudaErrorIllegalAddress, "step").code(),
            absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, MapsCublasErrorsToCodes) {
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "x").ok());
  absl::Status st = CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "workspace");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("CUBLAS_STATUS_ALLOC_FAILED"));
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "matmul").code(),
            absl::StatusCode::kFailedPrecondition);
}

absl::Status ReturnsEarly(bool fail, int* reached) {
  BRAID_CUDA_RETURN_IF_ERROR(fail ? cudaErrorInvalidValue : cudaSuccess);
  ++*reached;
  return absl::OkStatus();
}

TEST(CudaStatusTest, MacroReturnsTheFirstError) {
  int reached = 0;
  EXPECT_TRUE(ReturnsEarly(false, &reached).ok());
  absl::Status st = ReturnsEarly(true, &reached);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("cudaErrorInvalidValue"));
  EXPECT_EQ(reached, 1);
}

TEST(DeviceMemoryTest, OutOfMemoryMessageNamesAskedAndFree) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(OutOfMemoryMessage("weights", 12 * kGiB + kGiB / 2,
                               DeviceMemoryInfo{3 * kGiB, 140 * kGiB}),
            "weights: asked 12.50 GiB, 3.00 GiB free of 140.00 GiB");
}

}  // namespace
}  // namespace braid::kernels::cuda
