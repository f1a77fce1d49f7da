// Register-tiled quantized GEMM: a tile of output rows x tokens computed
// together, each element with exactly the arithmetic of the row dot product
// (dot.h), so results are bit-identical to DotRow whatever the tile shape or
// the number of tokens in the batch.
//
// Design: a lone row dot is latency-bound (one accumulator chain per row) and
// reloads the activation row for every weight row. The tile keeps R x T
// independent chains in registers: a weight block is loaded and unpacked once
// for T tokens, an activation block once for R rows. Only the grouping of
// work changes, never the order of operations inside one output element.
// Pure, thread-safe.
#ifndef BRAID_KERNELS_CPU_GEMM_GEMM_TILE_H_
#define BRAID_KERNELS_CPU_GEMM_GEMM_TILE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu {

class ThreadPool;

// Activation tables of the AVX-512 tiles for one GemmTile input, laid out
// once and shared by every row range of it (otherwise each call lays them
// out itself, ~0.5 us, a quarter of a 60-row range's work at 8 tokens).
// Built by PrepareGemmTileActivations; views into the caller's buffer.
struct GemmTileActivations {
  // For GGUF rows (the row tiles): f32 scales [block][token] (Q4_1: and
  // sums, xs).
  const float* xd = nullptr;
  const float* xs = nullptr;
  // For the quad layout (gemm_quads_avx512.cc): each block's groups doubled
  // (Q8_0: + 128), scales (Q4_1: and sums) four times each.
  const uint8_t* xq = nullptr;
  const float* dpat = nullptr;
  const float* spat = nullptr;
  int64_t n_tok = 0;
};

// Bytes PrepareGemmTileActivations needs for weights of `type` with n
// columns and n_tok tokens; 0 when the tiles would not use prepared tables
// (no AVX-512, another type, or a batch processed in several chunks).
size_t GemmTileActivationsBytes(DType type, int64_t n, int64_t n_tok);

// Lays out the tables of activations x (as for GemmTile) into buf (at least
// GemmTileActivationsBytes bytes); false (nothing done) when that is 0.
// Only blocks [b0, b1) (b1 < 0: all, n / 32) of tokens [t0, t1) (t1 < 0:
// n_tok) are written, and only those blocks of x are read, so disjoint
// ranges can be laid out in parallel; *out is the same for every range.
// quad_layout: for weights in the quad layout (GemmTileQuads).
bool PrepareGemmTileActivations(DType type, const uint8_t* x,
                                size_t x_row_bytes, int64_t n, int64_t n_tok,
                                uint8_t* buf, GemmTileActivations* out,
                                int64_t t0 = 0, int64_t t1 = -1,
                                bool quad_layout = false, int64_t b0 = 0,
                                int64_t b1 = -1);

// y[t * ld_y + r] (= or += when accumulate) for rows r in [r0, r1) of the
// weight matrix w (rows of w_row_bytes bytes) and tokens t in [0, n_tok) of
// the activations x (rows of x_row_bytes, already in ActivationDType(type)),
// n = columns. Any type; tiled kernels for Q4_1, Q4_0 and Q8_0 on AVX-512 (with
// VNNI), for F32, F16 and BF16 on AVX-512 or AVX2 (n a multiple of 16), for
// Q5_1 on AVX-512 too, for Q4_0, Q4_1, Q8_0, Q5_1 and IQ4_NL on AVX2, for
// the K-quants on AVX2
// (each row's blocks unpacked once for up to 16 tokens), DotRow otherwise.
// `prepared`, when given, holds x's tables (PrepareGemmTileActivations).
// Rows below prefetch_end (when past r1) may be prefetched as the range's
// own: the rows the caller takes next, so the weights keep streaming from
// one call to the next.
void GemmTile(DType type, const uint8_t* w, size_t w_row_bytes,
              const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
              int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
              bool accumulate, const GemmTileActivations* prepared = nullptr,
              int64_t prefetch_end = 0);

// A Q4_1, Q4_0 or Q8_0 matrix in the quad layout: the same bytes as the GGUF
// rows, permuted within each group of 4 rows so a block of the 4 rows is
// one contiguous run (their scales, then rows 0 and 1's quants with their
// 32-bit groups alternating, then rows 2 and 3's): the AVX-512 tiles load a
// row pair's block in the form their accumulators take (two rows per
// register, lanes alternating) and the 4 rows' scales with one load.
// Products are the row dot's bit for bit, like GemmTile's.
struct QuadWeights {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  AlignedBytes data;
};

// Q4_K, Q5_K, Q6_K and Q5_0 matrices have an octet layout in the same struct
// (8 rows a group, the same bytes interleaved so each 32-bit lane of an AVX2
// vector is one row: gemm_octets.h, with AVX2 and AVX-512 tiles), also bit
// for bit the row dot's products.
//
// Whether this CPU's kernels take the quad layout for such a matrix:
// AVX-512 with VNNI, Q4_1, Q4_0 or Q8_0, rows a multiple of 4, at most 4096
// blocks a row; or AVX2, Q4_K, Q5_K, Q6_K or Q5_0, rows a multiple of 8 (the
// octets).
bool CanRepackQuads(DType type, int64_t rows, int64_t cols);

// The quad layout of w (rows of DTypeRowBytes(type, cols) bytes), on the
// threads of `pool` when given.
QuadWeights RepackQuads(DType type, const void* w, int64_t rows, int64_t cols,
                        ThreadPool* pool = nullptr);

// Row r of a quad-layout matrix back in its GGUF form (tests).
void UnpackQuadRow(const QuadWeights& w, int64_t r, uint8_t* out);

// GemmTile for quad-layout weights, rows [r0, r1) (the tiles take whole
// quads, or octets; rows of a group the range cuts go one by one through
// DotRow).
// `prepared`: tables laid out with quad_layout (or null); prefetch_end as
// for GemmTile.
void GemmTileQuads(const QuadWeights& w, const uint8_t* x, size_t x_row_bytes,
                   int64_t r0, int64_t r1, int64_t n_tok, float* y,
                   int64_t ld_y, bool accumulate,
                   const GemmTileActivations* prepared = nullptr,
                   int64_t prefetch_end = 0);

namespace internal {
// The AVX2 tiled path; false if it does not serve `type`.
bool GemmTileAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                  const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                  int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                  bool accumulate, int64_t prefetch_end = 0);
// The AVX-512 tiled path (Q4_1 and Q8_0); false if it does not serve `type`.
// quad_layout: w is in the quad layout (rows r0, r1 multiples of 4).
bool GemmTileAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate, const GemmTileActivations* prepared,
                    bool quad_layout = false, int64_t prefetch_end = 0);
// The AVX-512 tiles for float weights (F32, F16, BF16) against f32
// activations (x_row_bytes apart), in dot.h's order for float rows; false if
// it does not serve `type` or n is not a multiple of 16.
bool GemmFloatAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                     const float* x, size_t x_row_bytes, int64_t n, int64_t r0,
                     int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                     bool accumulate);
// Their AVX2 form (the same bits).
bool GemmFloatAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                   const float* x, size_t x_row_bytes, int64_t n, int64_t r0,
                   int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                   bool accumulate);
size_t GemmTileActivationsBytesAvx512(DType type, int64_t n, int64_t n_tok);
// The octet layout (gemm_octets.h) of Q4_K, Q5_K, Q6_K and Q5_0: rows a
// multiple of 8, in DTypeRowBytes(type, cols) * rows bytes (RepackOctets: the
// octets [g0, g1), rows 8 * g0 .. 8 * g1); one row back in GGUF
// form; the product of octets [r0 / 8, r1 / 8) (r0, r1 multiples of 8) with
// n_tok activation rows (Q8_K; Q8_0 for Q5_0), y as GemmTile writes it.
bool IsOctetType(DType type);
// Values a block of an octet type (columns are a multiple of it).
int64_t OctetBlockElements(DType type);
void RepackOctets(DType type, const uint8_t* w, int64_t cols, uint8_t* out,
                  int64_t g0, int64_t g1);
void UnpackOctetRow(DType type, const uint8_t* octets, int64_t cols, int64_t r,
                    uint8_t* out);
void GemmOctetsAvx2(DType type, const uint8_t* octets, int64_t cols,
                    const uint8_t* x, size_t x_row_bytes, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate);
// Its AVX-512 + VNNI form (gemm_octets_avx512.cc), the same bits.
void GemmOctetsAvx512(DType type, const uint8_t* octets, int64_t cols,
                      const uint8_t* x, size_t x_row_bytes, int64_t r0,
                      int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                      bool accumulate);
bool PrepareGemmTileActivationsAvx512(DType type, const uint8_t* x,
                                      size_t x_row_bytes, int64_t n,
                                      int64_t n_tok, uint8_t* buf,
                                      GemmTileActivations* out, int64_t t0,
                                      int64_t t1, bool quad_layout, int64_t b0,
                                      int64_t b1);
}  // namespace internal

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_GEMM_GEMM_TILE_H_
