// Element types and ggml-compatible quantized block formats.
//
// Block layouts match ggml byte for byte (they are read straight out of GGUF
// mmaps):
//   Q4_0: {fp16 d; u8 qs[16]}          x = (q - 8) * d
//   Q4_1: {fp16 d; fp16 m; u8 qs[16]}  x = q * d + m
//   Q8_0: {fp16 d; i8 qs[32]}          x = q * d
//   Q8_1: {fp16 d; fp16 s; i8 qs[32]}  x = q * d, s = d * sum(q)
// For the 4-bit types, byte j holds element j in its low nibble and element j +
// 16 in its high nibble. Activation quantizers round like ggml's x86 path. All
// functions are pure and thread-safe.
#ifndef BRAID_KERNELS_CPU_QUANT_H_
#define BRAID_KERNELS_CPU_QUANT_H_

#include <cstddef>
#include <cstdint>

namespace braid::kernels::cpu {

// Numeric values equal ggml's ggml_type so GGUF type ids map one to one.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kBF16 = 30,
};

inline constexpr int kQK = 32;  // Elements per block for every quantized type.

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ4_0) == 18, "ggml layout");
static_assert(sizeof(BlockQ4_1) == 20, "ggml layout");
static_assert(sizeof(BlockQ8_0) == 34, "ggml layout");
static_assert(sizeof(BlockQ8_1) == 36, "ggml layout");

// True for the types above.
bool IsKnownDType(uint32_t raw_type);
const char* DTypeName(DType type);
// Elements per block (1 for float types).
int64_t DTypeBlockSize(DType type);
// Bytes per block.
int64_t DTypeBlockBytes(DType type);
// Bytes of a row of n elements; n must be a multiple of the block size.
size_t DTypeRowBytes(DType type, int64_t n);
// The activation type a weight type is dotted against (kF32 for float weights).
DType ActivationDType(DType weight_type);

// dst[0..n) = dequantized src row. n must be a multiple of the block size.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// Activation quantizers (n a multiple of 32). AVX2 where the CPU has it,
// else scalar; both give the same blocks.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n);

namespace internal {
void QuantizeRowQ8_0Scalar(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1Scalar(const float* x, BlockQ8_1* y, int64_t n);
void QuantizeRowQ8_0Avx2(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1Avx2(const float* x, BlockQ8_1* y, int64_t n);
}  // namespace internal
// Reference weight quantizers (ggml's *_ref), used to build test models.
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n);

// Quantizes (or converts) a float row to `type`; dst must hold DTypeRowBytes.
void QuantizeRow(DType type, const float* x, void* dst, int64_t n);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_QUANT_H_
