// GGUF weight tensors dequantized to BF16 on the GPU, once, at model load:
// the raw tensor bytes are uploaded as they are in the file, and one pass
// turns them into the BF16 device buffers the CUDA model computes with.
//
// Every value equals kernels/cpu's DequantizeRow followed by its Fp32ToBf16
// (round to nearest even), bit for bit: the device runs the decoders of
// dequant_blocks.h, which the host test checks against kernels/cpu.
//
// Host code only (no CUDA headers here); built under --config=cuda. The
// functions are thread-safe: they only enqueue work on the caller's stream.
#ifndef BRAID_KERNELS_CUDA_DEQUANT_H_
#define BRAID_KERNELS_CUDA_DEQUANT_H_

#include <cstdint>

#include "absl/status/status.h"

namespace braid::kernels::cuda {

// dst[0, n_elements) = bf16(element i of the tensor at src), for `type` a
// GGUF type id (kernels/cuda/dequant_blocks.h: F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K .. Q6_K). `src` (the tensor's GGUF bytes,
// aligned to 2 bytes, 4 for F32) and `dst` (2-byte aligned; 16 gives the
// fastest stores) are device pointers; `stream` is a cudaStream_t (nullptr:
// the default stream). Enqueues one kernel and returns: no allocation, no
// synchronisation, so a fault inside the kernel surfaces at the caller's
// next synchronisation. InvalidArgument for a type it does not decode (the
// activation types Q8_1, Q8_K included), n_elements negative or not a
// multiple of the type's block, a null or misaligned pointer; the launch's
// CUDA error as CudaStatus maps it. n_elements == 0 does nothing.
absl::Status DequantizeToBf16(uint32_t type, const void* src,
                              int64_t n_elements, uint16_t* dst, void* stream);

// dst[0, n) = bf16(src[0, n)): DequantizeToBf16 of an F32 tensor.
absl::Status ConvertF32ToBf16(const float* src, int64_t n, uint16_t* dst,
                              void* stream);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_DEQUANT_H_
