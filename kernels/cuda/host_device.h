// BRAID_HD marks a function compiled for both the host and the device: the
// CUDA kernels and the host tests that check them against kernels/cpu run
// the same code. Plain C++ without nvcc.
#ifndef BRAID_KERNELS_CUDA_HOST_DEVICE_H_
#define BRAID_KERNELS_CUDA_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define BRAID_HD __host__ __device__ inline
#else
#define BRAID_HD inline
#endif

#endif  // BRAID_KERNELS_CUDA_HOST_DEVICE_H_
