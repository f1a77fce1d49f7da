// Tensor-core and asynchronous-copy instructions of sm_80 and later as
// inline device functions (PTX): cp.async 16-byte copies global -> shared,
// ldmatrix loads of 8x8 fp16 matrices, mma.sync m16n8k16 (fp16 inputs, f32
// accumulators). For .cu files only (nvcc); no state.
//
// Register fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"), for
// lane = 4 * g + c: an A operand (16 x 16, row-major) is four registers of
// two fp16 each, (g, 2c..2c+1), (g + 8, 2c..), (g, 2c + 8..), (g + 8,
// 2c + 8..); a B operand (16 x 8) two, (k = 2c..2c+1, n = g) and (k = 2c +
// 8.., n = g); an accumulator (16 x 8 f32) four, (g, 2c), (g, 2c + 1),
// (g + 8, 2c), (g + 8, 2c + 1). ldmatrix gives lane (g, c) elements
// (g, 2c..2c+1) of each matrix, or with .trans (2c..2c+1, g).
#ifndef BRAID_KERNELS_CUDA_MMA_SM80_CUH_
#define BRAID_KERNELS_CUDA_MMA_SM80_CUH_

#include <cuda_fp16.h>

#include <cstdint>

namespace braid::kernels::cuda::sm80 {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronous; zeros when !valid (src unread).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src,
                                            bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   SharedAddress(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most n committed groups are pending.
template <int n>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Four 8x8 fp16 matrices; lanes 8i..8i+7 address the rows of matrix i.
__device__ __forceinline__ void LoadMatrix4(uint32_t r[4], const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SharedAddress(row))
      : "memory");
}
// The same, each matrix transposed.
__device__ __forceinline__ void LoadMatrix4Trans(uint32_t r[4],
                                                 const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SharedAddress(row))
      : "memory");
}

// acc (16 x 8 f32) += a (16 x 16 fp16) * b (16 x 8 fp16).
__device__ __forceinline__ void Mma16816(float acc[4], const uint32_t a[4],
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to fp16 (nearest even), lo in the low half.
__device__ __forceinline__ uint32_t PackHalf2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace braid::kernels::cuda::sm80

#endif  // BRAID_KERNELS_CUDA_MMA_SM80_CUH_
