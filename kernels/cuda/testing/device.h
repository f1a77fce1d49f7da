// Helpers of the GPU conformance tests (tag "gpu"): device copies of host
// vectors and the normalised mean squared error the tolerances are stated
// in (llama.cpp's test-backend-ops measure).
#ifndef BRAID_KERNELS_CUDA_TESTING_DEVICE_H_
#define BRAID_KERNELS_CUDA_TESTING_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_memory.h"

namespace braid::kernels::cuda::testing {

// A device copy of `v` (fails the test on error).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  absl::StatusOr<DeviceBuffer> buf =
      DeviceBuffer::Allocate(v.size() * sizeof(T) + 256, "test buffer");
  EXPECT_TRUE(buf.ok()) << buf.status();
  if (!buf.ok()) return DeviceBuffer();
  EXPECT_EQ(cudaMemcpy(buf->data(), v.data(), v.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return *std::move(buf);
}

// n elements of `buf` back on the host (synchronises the device first).
template <typename T>
std::vector<T> Download(const DeviceBuffer& buf, size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(out.data(), buf.data(), n * sizeof(T), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return out;
}

// A zeroed device buffer of n T.
template <typename T>
DeviceBuffer Zeros(size_t n) {
  return Upload(std::vector<T>(n));
}

// sum((a - b)^2) / sum(b^2), b the reference; +inf when any value of a is
// not finite.
inline double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = double{a[i]} - b[i];
    num += d * d;
    den += double{b[i]} * b[i];
  }
  return den > 0.0 ? num / den : num;
}

inline std::vector<float> RandomFloats(size_t n, uint32_t seed,
                                       float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace braid::kernels::cuda::testing

#endif  // BRAID_KERNELS_CUDA_TESTING_DEVICE_H_
