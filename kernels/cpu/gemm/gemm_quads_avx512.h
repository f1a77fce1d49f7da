// The quad-layout tiles (gemm_quads_avx512.cc) as gemm_tile_avx512.cc's
// Run calls them; Q4_1 or Q8_0 weights (`type`) in the quad layout, tables
// laid out by LayOutQuadTables. Internal to kernels/cpu; AVX-512 VNNI only.
#ifndef BRAID_KERNELS_CPU_GEMM_GEMM_QUADS_AVX512_H_
#define BRAID_KERNELS_CPU_GEMM_GEMM_QUADS_AVX512_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu::internal {

// Rows [r, r + 4) (w: the matrix) for a chunk's nc >= 3 tokens, quad tiles.
// The first tile prefetches near_bytes from `near` (the next tile's rows)
// into L1 and far_bytes from `far` (rows further ahead) into L2 while it
// computes, spread evenly over its blocks.
void QuadTileRows(DType type, const uint8_t* w, size_t w_row_bytes,
                  const uint8_t* xq, const float* dpat, const float* spat,
                  int64_t nb, int64_t r, int64_t nc, float* y, int64_t ld_y,
                  bool accumulate, const uint8_t* near, int64_t near_bytes,
                  const uint8_t* far, int64_t far_bytes);

// 4 * quads rows (quads 1 or 4; w: their first quad, y: their first row)
// for 1 or 2 tokens (n_tok), a row-quad tile, prefetching as QuadTileRows.
void RowQuadTiles(DType type, const uint8_t* w, int quads, const uint8_t* xq,
                  const float* dpat, const float* spat, int64_t nb, int n_tok,
                  float* y, int64_t ld_y, bool accumulate, const uint8_t* near,
                  int64_t near_bytes, const uint8_t* far, int64_t far_bytes);

// Blocks [b0, b1) of tokens [t0, t1) of a chunk of nc tokens (x: token 0)
// into the quad tables (xq, dpat, spat; see gemm_quads_avx512.cc); with
// t1 == nc also the last quad's tokens past nc, as zeros.
void LayOutQuadTables(DType type, const uint8_t* x, size_t x_row_bytes,
                      int64_t nc, int64_t nb, int64_t t0, int64_t t1,
                      int64_t b0, int64_t b1, uint8_t* xq, float* dpat,
                      float* spat);

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_GEMM_GEMM_QUADS_AVX512_H_
