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
#ifndef BRAID_KERNELS_CPU_GEMM_TILE_H_
#define BRAID_KERNELS_CPU_GEMM_TILE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant.h"

namespace braid::kernels::cpu {

// Activation tables of the AVX-512 tiles for one GemmTile input, laid out
// once and shared by every row range of it (otherwise each call lays them
// out itself, ~0.5 us, a quarter of a 60-row range's work at 8 tokens).
// Built by PrepareGemmTileActivations; views into the caller's buffer.
struct GemmTileActivations {
  const float* xd = nullptr;  // f32 scales [block][token]
  const float* xs = nullptr;  // Q4_1: f32 sums [block][token]
  // Batches of 3+ tokens (gemm_tile_avx512.cc's quad tiles): each block's
  // groups doubled (Q8_0: + 128), scales (Q4_1: and sums) four times each.
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
// Only tokens [t0, t1) (t1 < 0: n_tok) are written, so disjoint ranges can
// be laid out in parallel; *out is the same for every range.
bool PrepareGemmTileActivations(DType type, const uint8_t* x,
                                size_t x_row_bytes, int64_t n, int64_t n_tok,
                                uint8_t* buf, GemmTileActivations* out,
                                int64_t t0 = 0, int64_t t1 = -1);
// y[t * ld_y + r] (= or += when accumulate) for rows r in [r0, r1) of the
// weight matrix w (rows of w_row_bytes bytes) and tokens t in [0, n_tok) of
// the activations x (rows of x_row_bytes, already in ActivationDType(type)),
// n = columns. Any type; tiled kernels for Q4_1 and Q8_0 on AVX-512 (with
// VNNI), for Q4_0, Q4_1 and Q8_0 on AVX2, DotRow otherwise.
// `prepared`, when given, holds x's tables (PrepareGemmTileActivations).
void GemmTile(DType type, const uint8_t* w, size_t w_row_bytes,
              const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
              int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
              bool accumulate, const GemmTileActivations* prepared = nullptr);

namespace internal {
// The AVX2 tiled path; false if it does not serve `type`.
bool GemmTileAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                  const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                  int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                  bool accumulate);
// The AVX-512 tiled path (Q4_1 and Q8_0); false if it does not serve `type`.
bool GemmTileAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate, const GemmTileActivations* prepared);
size_t GemmTileActivationsBytesAvx512(DType type, int64_t n, int64_t n_tok);
bool PrepareGemmTileActivationsAvx512(DType type, const uint8_t* x,
                                      size_t x_row_bytes, int64_t n,
                                      int64_t n_tok, uint8_t* buf,
                                      GemmTileActivations* out, int64_t t0,
                                      int64_t t1);
// The AVX-512 path's quad tiles (batches of 3+ tokens) off (true: the
// paired-row tiles serve every batch) or on. Testing and benchmarking only
// (not synchronized with running kernels).
void SetDisableQuadTilesForTesting(bool disable);
}  // namespace internal

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_GEMM_TILE_H_
