// Kernel launches with programmatic dependent launch when it is on
// (launch.h), and the device side every launched kernel begins with.
#ifndef BRAID_KERNELS_CUDA_LAUNCH_CUH_
#define BRAID_KERNELS_CUDA_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/launch.h"

namespace braid::kernels::cuda {

// The first statement of every kernel Launch starts, before it reads or
// writes anything another kernel touches: waits for the grids before it in
// the stream to complete (a no-op when it was launched without PDL), then
// lets the next kernel be scheduled once every block of this one is running
// (its blocks wait here in turn, so the chain stays ordered even across a
// kernel that reads nothing of its predecessor's).
__device__ __forceinline__ void AwaitPrerequisiteGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with PDL when it is on.
// Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block,
                   size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute pdl[1] = {};
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = pdl;
  config.numAttrs = DependentLaunch() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_LAUNCH_CUH_
