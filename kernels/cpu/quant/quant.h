// Element types and ggml-compatible quantized block formats.
//
// Block layouts match ggml byte for byte (they are read straight out of GGUF
// mmaps):
//   Q4_0: {fp16 d; u8 qs[16]}          x = (q - 8) * d
//   Q4_1: {fp16 d; fp16 m; u8 qs[16]}  x = q * d + m
//   Q8_0: {fp16 d; i8 qs[32]}          x = q * d
//   Q8_1: {fp16 d; fp16 s; i8 qs[32]}  x = q * d, s = d * sum(q)
//   Q5_0: {fp16 d; u8 qh[4]; u8 qs[16]}          x = (q - 16) * d
//   Q5_1: {fp16 d; fp16 m; u8 qh[4]; u8 qs[16]}  x = q * d + m
//   IQ4_NL: {fp16 d; u8 qs[16]}        x = kIq4NlValues[q] * d
// For the 4- and 5-bit types, byte j holds element j in its low nibble and
// element j + 16 in its high nibble (5-bit: bit j of qh is element j's fifth
// bit). The K-quants (quant_k.cc) use super-blocks of 256 elements with
// sub-block scales, in ggml's layouts; they are dotted against Q8_K
// activations ({f32 d; i8 qs[256]; i16 bsums[16]}, bsums the sums of each 16
// quants). Activation quantizers round like ggml's x86 path. All functions
// are pure and thread-safe.
#ifndef BRAID_KERNELS_CPU_QUANT_QUANT_H_
#define BRAID_KERNELS_CPU_QUANT_QUANT_H_

#include <cstddef>
#include <cstdint>

namespace braid::kernels::cpu {

// Numeric values equal ggml's ggml_type so GGUF type ids map one to one.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kBF16 = 30,
};

inline constexpr int kQK = 32;     // Elements per block of the 32-types.
inline constexpr int kQK_K = 256;  // Elements per K-quant super-block.

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
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// The 16 values an IQ4_NL index selects (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4NlValues[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// K-quant super-blocks (256 elements). Scales are per sub-block: 16 of 16
// elements (Q2_K, Q3_K, Q6_K) or 8 of 32 (Q4_K, Q5_K, 6-bit scale and min
// packed in 12 bytes).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];  // 16 6-bit scales, offset by 32
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ5_0) == 22, "ggml layout");
static_assert(sizeof(BlockQ5_1) == 24, "ggml layout");
static_assert(sizeof(BlockIQ4_NL) == 18, "ggml layout");
static_assert(sizeof(BlockQ2_K) == 84, "ggml layout");
static_assert(sizeof(BlockQ3_K) == 110, "ggml layout");
static_assert(sizeof(BlockQ4_K) == 144, "ggml layout");
static_assert(sizeof(BlockQ5_K) == 176, "ggml layout");
static_assert(sizeof(BlockQ6_K) == 210, "ggml layout");
static_assert(sizeof(BlockQ8_K) == 292, "ggml layout");
static_assert(sizeof(BlockQ4_0) == 18, "ggml layout");
static_assert(sizeof(BlockQ4_1) == 20, "ggml layout");
static_assert(sizeof(BlockQ8_0) == 34, "ggml layout");
static_assert(sizeof(BlockQ8_1) == 36, "ggml layout");

// True for the types above.
bool IsKnownDType(uint32_t raw_type);
// True for the K-quant weight types (Q2_K..Q6_K), dotted against Q8_K.
bool IsKQuant(DType type);
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
// As ggml's quantize_row_q8_K (n a multiple of 256).
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);

namespace internal {
void QuantizeRowQ8_0Scalar(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1Scalar(const float* x, BlockQ8_1* y, int64_t n);
void QuantizeRowQ8_0Avx2(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1Avx2(const float* x, BlockQ8_1* y, int64_t n);
void QuantizeRowQ8_KScalar(const float* x, BlockQ8_K* y, int64_t n);
void QuantizeRowQ8_KAvx2(const float* x, BlockQ8_K* y, int64_t n);
// The dequantizers of quant_k.cc (n a multiple of the block size).
void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n);
void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n);
void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n);
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n);
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n);
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n);
void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n);
// Q4_K / Q5_K sub-block j's (j < 8) 6-bit scale and min from the 12 bytes.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// Q3_K sub-block j's (j < 16) scale, in [-32, 32).
inline int ScaleQ3K(int j, const uint8_t* q) {
  const int low = j < 8 ? q[j] & 0xF : q[j - 8] >> 4;
  const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}
}  // namespace internal
// Reference weight quantizers (ggml's *_ref), used to build test models.
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n);
void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n);
void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n);
// Plain round-to-nearest quantizers for the other weight types (quant_k.cc):
// valid blocks for tests and test models, not ggml's searched scales.
void QuantizeRowSimple(DType type, const float* x, void* dst, int64_t n);

// Quantizes (or converts) a float row to `type`; dst must hold DTypeRowBytes.
void QuantizeRow(DType type, const float* x, void* dst, int64_t n);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_QUANT_QUANT_H_
