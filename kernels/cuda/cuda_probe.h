#ifndef BRAID_KERNELS_CUDA_CUDA_PROBE_H_
#define BRAID_KERNELS_CUDA_CUDA_PROBE_H_

#include <string>

namespace braid::kernels::cuda {

// Number of visible CUDA devices; 0 when there is no driver or device.
// `error` (optional) receives the runtime's message on failure.
int DeviceCount(std::string* error);

// y[i] += a * x[i] on device 0, host buffers in and out. Returns false and
// fills `error` on any CUDA error.
bool Axpy(float a, const float* x, float* y, int n, std::string* error);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_CUDA_PROBE_H_
