// Random blocks of every GGUF weight type for the dequantization tests:
// random bytes with finite fp16 scale fields (float types: any bit pattern).
#ifndef BRAID_KERNELS_CUDA_TESTING_RANDOM_BLOCKS_H_
#define BRAID_KERNELS_CUDA_TESTING_RANDOM_BLOCKS_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cuda::testing {

using ::braid::kernels::cpu::DType;
namespace cpu = ::braid::kernels::cpu;

// A random finite half (any sign, zeros and subnormals included).
inline uint16_t RandomFiniteHalf(std::mt19937& rng) {
  for (;;) {
    const auto h = static_cast<uint16_t>(rng());
    if (((h >> 10) & 0x1F) != 0x1F) return h;
  }
}

// Byte offsets of a block type's fp16 fields (the rest are random bytes).
inline std::vector<int> HalfFieldOffsets(DType type) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// `blocks` random blocks of `type`: random bytes, finite fp16 scales. Float
// types get random bit patterns, NaNs and infinities included.
inline std::vector<uint8_t> RandomBlocks(DType type, int64_t blocks,
                                         std::mt19937& rng) {
  const int64_t bytes = cpu::DTypeBlockBytes(type);
  std::vector<uint8_t> data(blocks * bytes);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < blocks; ++i) {
    for (int offset : HalfFieldOffsets(type)) {
      const uint16_t h = RandomFiniteHalf(rng);
      std::memcpy(&data[i * bytes + offset], &h, sizeof(h));
    }
  }
  return data;
}

}  // namespace braid::kernels::cuda::testing

#endif  // BRAID_KERNELS_CUDA_TESTING_RANDOM_BLOCKS_H_
