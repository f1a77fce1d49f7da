#include "kernels/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::StatusOr<DeviceMemoryInfo> MemoryInfo() {
  DeviceMemoryInfo info;
  BRAID_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&info.free, &info.total));
  return info;
}

std::string OutOfMemoryMessage(std::string_view what, size_t asked,
                               const DeviceMemoryInfo& info) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::StrFormat("%s: asked %.2f GiB, %.2f GiB free of %.2f GiB", what,
                         asked / kGiB, info.free / kGiB, info.total / kGiB);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes,
                                                    std::string_view what) {
  DeviceBuffer buf;
  if (bytes == 0) return buf;
  const cudaError_t err = cudaMalloc(&buf.data_, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error state
    DeviceMemoryInfo info;
    cudaMemGetInfo(&info.free, &info.total);
    return absl::ResourceExhaustedError(OutOfMemoryMessage(what, bytes, info));
  }
  if (err != cudaSuccess) {
    buf.data_ = nullptr;
    return CudaStatus(err, std::string(what).c_str());
  }
  buf.bytes_ = bytes;
  return buf;
}

}  // namespace braid::kernels::cuda
