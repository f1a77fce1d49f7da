// Programmatic dependent launch (PDL, compute capability 9.0 and up): a
// kernel launched with it may start while the kernel before it in the stream
// is still finishing, so its launch latency and prologue hide behind that
// kernel's last wave instead of following it. Every braid kernel begins with
// AwaitPrerequisiteGrids() (launch.cuh), which holds it until the grids it
// depends on have completed and their writes are visible; the results are the
// same with PDL on or off, only the gaps between kernels change.
//
// One setting for the process: the CUDA model sets it at load
// (CudaModelOptions::dependent_launch, on only on devices that have it);
// steps, and the CUDA graphs captured from them, launch the way it says.
#ifndef BRAID_KERNELS_CUDA_LAUNCH_H_
#define BRAID_KERNELS_CUDA_LAUNCH_H_

namespace braid::kernels::cuda {

void SetDependentLaunch(bool on);
bool DependentLaunch();

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_LAUNCH_H_
