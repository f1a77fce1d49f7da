// Quantized GEMM on weights repacked at load for VNNI: 16 output rows per
// 512-bit vector, one lane per row.
//
// Design: the row-dot arithmetic of ggml (dot.h) keeps 8 float lanes per
// output element and block, so each block of each element costs an integer
// dot, a conversion and an fma on 8 lanes; a batch of 8 tokens spends most of
// its time there. Here a lane is a whole output element: the weights of 16
// rows are interleaved at load in 4-byte groups (chunk k of a block holds
// bytes 4k..4k+3 of each of the 16 rows), so chained dpbusd instructions with
// a broadcast group of the activation sum a block's 32 products of 16 rows
// at once, exactly, in integers. Per element and block the float work is then
// one conversion and one fma (Q4_1: two), on 16 elements at a time.
//
// Arithmetic of one output element y[t][r] (PackedDotReference is the scalar
// statement of it, and every tile shape gives its bits exactly):
//   acc = 0
//   for each block i, in order:
//     isum = sum of the block's 32 products q_w * q_x (exact integer)
//     acc  = fma(d_w * d_x, float(isum), acc)
//     Q4_1: acc = fma(m_w, s_x, acc)     (s_x: Q8_1's d * sum(q_x))
//   y = acc
// The block sums are exact integers (as ggml's eight lane sums are); the
// float work differs from ggml's in rounding only, and end to end both are
// about as close to exact math (//model:numerics_bench), but the results
// are not llama.cpp's bits. It never depends on the batch, the tile shape
// or the row range: batch invariance holds.
//
// Layouts, per group of 16 rows: first the scales of every block (Q4_1: 64
// bytes a block, d[16] then m[16] as f16; Q8_0: 32 bytes, d[16]), padded to
// 64 bytes, then the chunks of every block. Q4_1 has 4 chunks of 64 bytes a
// block (row j's qs bytes 4k..4k+3 at 4j; low nibbles are the block's
// elements 4k..4k+3, high nibbles 16+4k..16+4k+3); Q8_0 has 8 (row j's qs
// bytes 4k..4k+3, plus 128 so they are unsigned: sum((w + 128) x) -
// 128 sum(x) is the same integer; the activation tables hold -128 sum(x) per
// block). Groups are stored one after the other, so a run of rows is one
// contiguous stream.
#ifndef BRAID_KERNELS_CPU_GEMM_PACKED_GEMM_H_
#define BRAID_KERNELS_CPU_GEMM_PACKED_GEMM_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu {

// Rows per packed group.
inline constexpr int64_t kPackRows = 16;

struct PackedWeights {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t bytes = 0;
  AlignedBytes data;
};

// Bytes per block of a group's scales and of its chunks; of a group's scale
// area (padded) and of a whole group, nb blocks.
constexpr int64_t PackedScaleBytes(DType type) {
  return type == DType::kQ4_1 ? 64 : 32;
}
constexpr int64_t PackedChunkBytes(DType type) {
  return type == DType::kQ4_1 ? 256 : 512;
}
constexpr int64_t PackedScaleAreaBytes(DType type, int64_t nb) {
  return (nb * PackedScaleBytes(type) + 63) / 64 * 64;
}
constexpr int64_t PackedGroupBytes(DType type, int64_t nb) {
  return PackedScaleAreaBytes(type, nb) + nb * PackedChunkBytes(type);
}

// True when this CPU runs the packed kernels (AVX-512 F/BW/VL/DQ + VNNI, not
// disabled for testing) and a [rows, cols] matrix of `type` can be packed:
// Q4_1 or Q8_0, rows a multiple of 16.
bool CanPackWeights(DType type, int64_t rows, int64_t cols);

// True when activations for weights of `type` get packed-kernel tables
// (CanPackWeights for some shape of this type on this CPU).
bool UsesPackedActivations(DType type);

// Repacks w (row-major in the GGUF layout, rows of DTypeRowBytes) into the
// layout above. Requires CanPackWeights.
PackedWeights PackWeights(DType type, const void* w, int64_t rows,
                          int64_t cols);

// Floats of the activation tables for n_tok tokens of `cols` columns.
size_t PackedActivationFloats(int64_t cols, int64_t n_tok);

// Fills the tables (n_tok x blocks each): d_x as f32, then Q8_1's s_x as f32
// (Q4_1 weights) or -128 sum(q_x) as int32 bits (Q8_0 weights), from x, the
// activations already quantized to ActivationDType(weight_type).
void PreparePackedActivations(DType weight_type, const uint8_t* x,
                              size_t x_row_bytes, int64_t cols, int64_t n_tok,
                              float* tables);

// y[t * ld_y + r] (= or += when accumulate) for rows r in [r0, r1) (multiples
// of 16) and tokens t in [0, n_tok).
void PackedGemm(const PackedWeights& w, const uint8_t* x, size_t x_row_bytes,
                const float* tables, int64_t n_tok, int64_t r0, int64_t r1,
                float* y, int64_t ld_y, bool accumulate);

// One output element by the arithmetic above, from an unpacked weight row
// and an activation row (scalar; the tests' oracle).
float PackedDotReference(DType type, const uint8_t* w_row, const uint8_t* x_row,
                         int64_t cols);

namespace internal {
void PackedGemmAvx512(const PackedWeights& w, const uint8_t* x,
                      size_t x_row_bytes, const float* tables, int64_t n_tok,
                      int64_t r0, int64_t r1, float* y, int64_t ld_y,
                      bool accumulate);
}  // namespace internal

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_GEMM_PACKED_GEMM_H_
