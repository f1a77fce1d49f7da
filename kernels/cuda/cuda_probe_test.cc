#include "kernels/cuda/cuda_probe.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace braid::kernels::cuda {
namespace {

TEST(CudaProbeTest, AxpyMatchesHost) {
  std::string error;
  ASSERT_GT(DeviceCount(&error), 0) << "no CUDA device: " << error;
  std::vector<float> x(1000), y(1000), want(1000);
  for (int i = 0; i < 1000; ++i) {
    x[i] = i * 0.5f;
    y[i] = 1.0f - i;
    want[i] = y[i] + 2.0f * x[i];
  }
  ASSERT_TRUE(Axpy(2.0f, x.data(), y.data(), 1000, &error)) << error;
  for (int i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

}  // namespace
}  // namespace braid::kernels::cuda
