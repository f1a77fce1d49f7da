#include <cuda_runtime.h>

#include "kernels/cuda/cuda_probe.h"

namespace braid::kernels::cuda {
namespace {

__global__ void AxpyKernel(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

bool Check(cudaError_t e, std::string* error) {
  if (e == cudaSuccess) return true;
  if (error != nullptr) *error = cudaGetErrorString(e);
  return false;
}

}  // namespace

int DeviceCount(std::string* error) {
  int n = 0;
  if (!Check(cudaGetDeviceCount(&n), error)) return 0;
  return n;
}

bool Axpy(float a, const float* x, float* y, int n, std::string* error) {
  float* dx = nullptr;
  float* dy = nullptr;
  size_t bytes = sizeof(float) * n;
  bool ok = Check(cudaMalloc(&dx, bytes), error) &&
            Check(cudaMalloc(&dy, bytes), error) &&
            Check(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice), error) &&
            Check(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice), error);
  if (ok) {
    AxpyKernel<<<(n + 255) / 256, 256>>>(a, dx, dy, n);
    ok = Check(cudaGetLastError(), error) &&
         Check(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost), error);
  }
  cudaFree(dx);
  cudaFree(dy);
  return ok;
}

}  // namespace braid::kernels::cuda
