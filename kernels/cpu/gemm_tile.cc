#include "kernels/cpu/gemm_tile.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"

namespace braid::kernels::cpu {

size_t GemmTileActivationsBytes(DType type, int64_t n, int64_t n_tok) {
  return UseAvx512() ? internal::GemmTileActivationsBytesAvx512(type, n, n_tok)
                     : 0;
}

bool PrepareGemmTileActivations(DType type, const uint8_t* x,
                                size_t x_row_bytes, int64_t n, int64_t n_tok,
                                uint8_t* buf, GemmTileActivations* out,
                                int64_t t0, int64_t t1) {
  return UseAvx512() &&
         internal::PrepareGemmTileActivationsAvx512(
             type, x, x_row_bytes, n, n_tok, buf, out, t0, t1 < 0 ? n_tok : t1);
}

void GemmTile(DType type, const uint8_t* w, size_t w_row_bytes,
              const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
              int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
              bool accumulate, const GemmTileActivations* prepared) {
  if (UseAvx512() &&
      internal::GemmTileAvx512(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1,
                               n_tok, y, ld_y, accumulate, prepared)) {
    return;
  }
  if (UseAvx2() &&
      internal::GemmTileAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1,
                             n_tok, y, ld_y, accumulate)) {
    return;
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* xt = x + t * x_row_bytes;
    float* yt = y + t * ld_y;
    for (int64_t r = r0; r < r1; ++r) {
      const float v = DotRow(type, w + r * w_row_bytes, xt, n);
      yt[r] = accumulate ? yt[r] + v : v;
    }
  }
}

}  // namespace braid::kernels::cpu
