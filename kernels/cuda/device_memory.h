// Device memory owned by a value: DeviceBuffer frees its allocation when it
// goes. Allocation failures are absl::Status naming what was being
// allocated, how much was asked and how much the device has free.
#ifndef BRAID_KERNELS_CUDA_DEVICE_MEMORY_H_
#define BRAID_KERNELS_CUDA_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braid::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // `bytes` of device memory on the current device (0 bytes: an empty
  // buffer). ResourceExhausted when it does not fit: "<what>: asked 12.50
  // GiB, 3.20 GiB free of 139.80 GiB".
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes,
                                               std::string_view what);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Free and total memory of the current device, in bytes.
struct DeviceMemoryInfo {
  size_t free = 0;
  size_t total = 0;
};
absl::StatusOr<DeviceMemoryInfo> MemoryInfo();

// The message of an allocation that did not fit (DeviceBuffer::Allocate).
std::string OutOfMemoryMessage(std::string_view what, size_t asked,
                               const DeviceMemoryInfo& info);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_DEVICE_MEMORY_H_
