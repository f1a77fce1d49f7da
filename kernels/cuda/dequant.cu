// The dequantization kernel behind kernels/cuda/dequant.h. No absl here
// (nvcc): the launcher returns a cudaError_t as an int and dequant.cc turns
// it into an absl::Status after checking the arguments.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/dequant_blocks.h"

namespace braid::kernels::cuda {
namespace internal {

// Declared in dequant.cc.
int LaunchDequantizeToBf16(uint32_t type, const void* src, int64_t n_elements,
                           uint16_t* dst, void* stream);

}  // namespace internal

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any supported GPU several times over; larger
// tensors loop (grid-stride).
constexpr int64_t kMaxBlocks = 1 << 16;

BRAID_HD uint32_t PackBf16(float lo, float hi) {
  return FloatToBf16(lo) | (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
}

// One thread per group of 8 consecutive outputs: it decodes them from their
// block (a warp covers one K-quant super-block or eight 32-element blocks,
// so the block bytes a warp reads are contiguous) and writes them with one
// 16-byte store, consecutive threads to consecutive addresses. The type is
// a template argument so DecodeGroup's switch folds away. `vector_store`:
// dst is 16-byte aligned; else the values are stored one by one, as are
// those of a float type's last partial group.
template <uint32_t kType>
__global__ void __launch_bounds__(kThreads)
    DequantizeToBf16Kernel(const uint8_t* __restrict__ src, int64_t n,
                           uint16_t* __restrict__ dst, bool vector_store) {
  const int64_t groups = (n + kGroupElements - 1) / kGroupElements;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < groups; g += stride) {
    const int64_t e0 = g * kGroupElements;
    if (e0 + kGroupElements <= n) {
      float v[kGroupElements];
      DecodeGroup(kType, src, e0, kGroupElements, v);
      if (vector_store) {
        *reinterpret_cast<uint4*>(dst + e0) =
            make_uint4(PackBf16(v[0], v[1]), PackBf16(v[2], v[3]),
                       PackBf16(v[4], v[5]), PackBf16(v[6], v[7]));
      } else {
        for (int k = 0; k < kGroupElements; ++k) {
          dst[e0 + k] = FloatToBf16(v[k]);
        }
      }
    } else {
      for (int64_t e = e0; e < n; ++e) {  // a float type's last few
        float v;
        DecodeGroup(kType, src, e, 1, &v);
        dst[e] = FloatToBf16(v);
      }
    }
  }
}

template <uint32_t kType>
cudaError_t Launch(const void* src, int64_t n, uint16_t* dst,
                   cudaStream_t stream) {
  const int64_t groups = (n + kGroupElements - 1) / kGroupElements;
  int64_t blocks = (groups + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  const bool vector_store = reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  DequantizeToBf16Kernel<kType>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          static_cast<const uint8_t*>(src), n, dst, vector_store);
  return cudaGetLastError();
}

}  // namespace

int internal::LaunchDequantizeToBf16(uint32_t type, const void* src,
                                     int64_t n_elements, uint16_t* dst,
                                     void* stream) {
  if (n_elements <= 0) return cudaSuccess;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kTypeF32:
      return Launch<kTypeF32>(src, n_elements, dst, s);
    case kTypeF16:
      return Launch<kTypeF16>(src, n_elements, dst, s);
    case kTypeBF16:
      return Launch<kTypeBF16>(src, n_elements, dst, s);
    case kTypeQ4_0:
      return Launch<kTypeQ4_0>(src, n_elements, dst, s);
    case kTypeQ4_1:
      return Launch<kTypeQ4_1>(src, n_elements, dst, s);
    case kTypeQ5_0:
      return Launch<kTypeQ5_0>(src, n_elements, dst, s);
    case kTypeQ5_1:
      return Launch<kTypeQ5_1>(src, n_elements, dst, s);
    case kTypeQ8_0:
      return Launch<kTypeQ8_0>(src, n_elements, dst, s);
    case kTypeIQ4_NL:
      return Launch<kTypeIQ4_NL>(src, n_elements, dst, s);
    case kTypeQ2_K:
      return Launch<kTypeQ2_K>(src, n_elements, dst, s);
    case kTypeQ3_K:
      return Launch<kTypeQ3_K>(src, n_elements, dst, s);
    case kTypeQ4_K:
      return Launch<kTypeQ4_K>(src, n_elements, dst, s);
    case kTypeQ5_K:
      return Launch<kTypeQ5_K>(src, n_elements, dst, s);
    case kTypeQ6_K:
      return Launch<kTypeQ6_K>(src, n_elements, dst, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace braid::kernels::cuda
