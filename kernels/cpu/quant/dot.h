// Row dot products between a weight row and an activation row.
//
// Quantized weights are dotted against activations quantized to their partner
// type (see ActivationDType): Q4_0.Q8_0, Q4_1.Q8_1, Q8_0.Q8_0, using integer
// arithmetic within a block like ggml. Float weights (F32/F16/BF16) are dotted
// against f32 activations, in one order on every path (and in the batched
// tiles, gemm_tile.h): element i < n - n % 8 goes to lane i % 16 of 16
// accumulators, one fma each, the lanes are summed as ReduceAdd16
// (ggml_reduce.h) does, then the last n % 8 elements are added one fma each.
// (llama.cpp rounds the activations of F16 and BF16 weights to the weights'
// type first; braid keeps them in f32, closer to exact math.) Each public
// function picks the AVX2 or the scalar path at run time (UseAvx2()); both
// paths are exported under internal:: so tests can compare them. `n` is the
// number of elements (a multiple of 32 for quantized types). Pure, thread-safe.
#ifndef BRAID_KERNELS_CPU_QUANT_DOT_H_
#define BRAID_KERNELS_CPU_QUANT_DOT_H_

#include <cstdint>

#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu {

float DotQ4_0Q8_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
float DotQ4_1Q8_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
float DotQ8_0Q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
// The 5-bit and IQ4_NL types and the K-quants (dot_k.cc): each K-quant block's
// integer sums are exact and the same on both paths, and so is the float
// arithmetic over them (the AVX2 results equal the scalar ones bit for bit).
float DotQ5_0Q8_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
float DotQ5_1Q8_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);
float DotIQ4_NLQ8_0(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
float DotQ2_KQ8_K(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
float DotQ3_KQ8_K(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
float DotQ4_KQ8_K(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
float DotQ5_KQ8_K(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
float DotQ6_KQ8_K(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);
float DotF32F32(const float* w, const float* x, int64_t n);
float DotF16F32(const uint16_t* w, const float* x, int64_t n);
float DotBF16F32(const uint16_t* w, const float* x, int64_t n);

// Dots of an fp16 row with an f32 row that holds fp16 values (a query or
// softmax row already rounded to fp16), summed in the exact order of one of
// llama.cpp's F16 matmul kernels (its AVX-512 build), for attention that
// reproduces llama.cpp bit for bit:
//   DotF16F32Vec: ggml_vec_dot_f16, used for one-token batches: 4 accumulators
//     of 16 lanes over steps of 64 elements, pairwise-combined, lanes reduced
//     (ggml_reduce.h), then the n % 64 tail added in double.
//   DotF16F32Gemm: llamafile's tinyBLAS, used for batches of 2+ tokens: one
//     16-lane accumulator over the whole row, then the lane reduction.
//     n must be a multiple of 16 (tinyBLAS declines other sizes).
// Every product is one fused multiply-add (exact, since fp16 x fp16 fits).
float DotF16F32Vec(const uint16_t* x, const float* y, int64_t n);
float DotF16F32Gemm(const uint16_t* x, const float* y, int64_t n);

// out[r] = DotF16F32Vec (or DotF16F32Gemm)(xs[r], y, n) for r in
// [0, count): the same bits, with the rows' dependency chains overlapping.
void DotF16F32VecRows(const uint16_t* const* xs, int64_t count, const float* y,
                      int64_t n, float* out);
void DotF16F32GemmRows(const uint16_t* const* xs, int64_t count, const float* y,
                       int64_t n, float* out);

// y[i] += a * x[i] (one fused multiply-add per element), x in fp16.
void AxpyF16(float a, const uint16_t* x, float* y, int64_t n);
// AxpyF16(a[r], xs[r], ys[r], n) for r = 0, 1, ..., count - 1 in order.
void AxpyF16Rows(const float* a, const uint16_t* const* xs, float* const* ys,
                 int64_t count, int64_t n);
// y[i] *= a.
void Scale(float a, float* y, int64_t n);
// y[i] += x[i].
void AddF32(const float* x, float* y, int64_t n);

// Dot of a row of `weight_type` with an activation row already in
// ActivationDType(weight_type).
float DotRow(DType weight_type, const void* w, const void* x, int64_t n);

namespace internal {
float DotQ4_0Q8_0Scalar(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
float DotQ4_1Q8_1Scalar(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
float DotQ8_0Q8_0Scalar(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
float DotF32F32Scalar(const float* w, const float* x, int64_t n);
float DotF16F32Scalar(const uint16_t* w, const float* x, int64_t n);
float DotBF16F32Scalar(const uint16_t* w, const float* x, int64_t n);
void AxpyF16Scalar(float a, const uint16_t* x, float* y, int64_t n);
void AddF32Scalar(const float* x, float* y, int64_t n);
float DotF16F32VecScalar(const uint16_t* x, const float* y, int64_t n);
float DotF16F32GemmScalar(const uint16_t* x, const float* y, int64_t n);

float DotQ5_0Q8_0Scalar(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
float DotQ5_1Q8_1Scalar(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);
float DotIQ4_NLQ8_0Scalar(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
float DotQ2_KQ8_KScalar(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
float DotQ3_KQ8_KScalar(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
float DotQ4_KQ8_KScalar(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
float DotQ5_KQ8_KScalar(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
float DotQ6_KQ8_KScalar(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);

float DotQ5_0Q8_0Avx2(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
float DotQ5_1Q8_1Avx2(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);
float DotIQ4_NLQ8_0Avx2(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
float DotQ2_KQ8_KAvx2(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
float DotQ3_KQ8_KAvx2(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
float DotQ4_KQ8_KAvx2(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
float DotQ5_KQ8_KAvx2(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
float DotQ6_KQ8_KAvx2(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);
// GemmTile's AVX2 path for the K-quants (DotRow's arithmetic for every
// element); false for other types.
bool GemmKQuantAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate);
// The float arithmetic of a K-quant row dot over its blocks' exact integer
// sums, shared by both paths: sum += d * isum, then sum -= dmin * msum, where
// d = fp16 d * x.d and dmin = fp16 dmin * x.d.
inline float KQuantAccumulate(float sum, float d, float dmin, int isum,
                              int msum) {
  sum = __builtin_fmaf(d, static_cast<float>(isum), sum);
  return __builtin_fmaf(-dmin, static_cast<float>(msum), sum);
}

float DotQ4_0Q8_0Avx2(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
float DotQ4_1Q8_1Avx2(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
float DotQ8_0Q8_0Avx2(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
float DotF32F32Avx2(const float* w, const float* x, int64_t n);
float DotF16F32Avx2(const uint16_t* w, const float* x, int64_t n);
float DotBF16F32Avx2(const uint16_t* w, const float* x, int64_t n);
void AxpyF16Avx2(float a, const uint16_t* x, float* y, int64_t n);
void AddF32Avx2(const float* x, float* y, int64_t n);
float DotF16F32VecAvx2(const uint16_t* x, const float* y, int64_t n);
float DotF16F32GemmAvx2(const uint16_t* x, const float* y, int64_t n);
void DotF16F32VecRowsAvx2(const uint16_t* const* xs, int64_t count,
                          const float* y, int64_t n, float* out);
void DotF16F32GemmRowsAvx2(const uint16_t* const* xs, int64_t count,
                           const float* y, int64_t n, float* out);
void AxpyF16RowsAvx2(const float* a, const uint16_t* const* xs,
                     float* const* ys, int64_t count, int64_t n);

// AVX-512 forms (UseAvx512()), bit-identical to the AVX2 ones.
void DotF16F32VecRowsAvx512(const uint16_t* const* xs, int64_t count,
                            const float* y, int64_t n, float* out);
void DotF16F32GemmRowsAvx512(const uint16_t* const* xs, int64_t count,
                             const float* y, int64_t n, float* out);
void AxpyF16RowsAvx512(const float* a, const uint16_t* const* xs,
                       float* const* ys, int64_t count, int64_t n);
void AddF32Avx512(const float* x, float* y, int64_t n);
}  // namespace internal

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_QUANT_DOT_H_
