#include "kernels/cuda/dequant.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/dequant_blocks.h"
#include "kernels/cuda/status.h"

namespace braid::kernels::cuda {
namespace internal {

// Defined in dequant.cu: enqueues the kernel (arguments already checked;
// n_elements <= 0 enqueues nothing) and returns the launch's cudaError_t.
// Declared here rather than in a header because nvcc does not compile
// dequant.h's absl include.
int LaunchDequantizeToBf16(uint32_t type, const void* src, int64_t n_elements,
                           uint16_t* dst, void* stream);

}  // namespace internal

absl::Status DequantizeToBf16(uint32_t type, const void* src,
                              int64_t n_elements, uint16_t* dst, void* stream) {
  const int block_elements = BlockElements(type);
  if (block_elements == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DequantizeToBf16: type ", type, " (", TypeName(type),
                     ") is not a weight type it dequantizes"));
  }
  if (n_elements < 0 || n_elements % block_elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DequantizeToBf16: ", n_elements, " elements of ", TypeName(type),
        " are not a whole number of its ", block_elements, "-element blocks"));
  }
  if (n_elements == 0) return absl::OkStatus();
  const uintptr_t src_alignment = type == kTypeF32 ? 4 : 2;
  if (src == nullptr || dst == nullptr ||
      reinterpret_cast<uintptr_t>(src) % src_alignment != 0 ||
      reinterpret_cast<uintptr_t>(dst) % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DequantizeToBf16: ", TypeName(type),
                     " source or destination pointer null or misaligned"));
  }
  return CudaStatus(static_cast<cudaError_t>(internal::LaunchDequantizeToBf16(
                        type, src, n_elements, dst, stream)),
                    "DequantizeToBf16 kernel launch");
}

absl::Status ConvertF32ToBf16(const float* src, int64_t n, uint16_t* dst,
                              void* stream) {
  return DequantizeToBf16(kTypeF32, src, n, dst, stream);
}

}  // namespace braid::kernels::cuda
