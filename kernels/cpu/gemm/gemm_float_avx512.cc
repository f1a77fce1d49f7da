// AVX-512 tiles for float weight rows (F32, F16, BF16) against f32
// activations: R rows x T tokens, each (row, token) one 16-lane accumulator
// over the row in steps of 16 (lane j takes elements j, j + 16, ...), its
// lanes summed by ReduceAdd16x16: dot.h's order for float rows, so every
// output has the bits of DotF32F32 / DotF16F32 / DotBF16F32 whatever the
// batch. A weight vector is loaded (and converted) once per step for the
// tile's T tokens.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593), and -Wuninitialized on
// _mm512_shuffle_f32x4's (ReduceAdd16x16).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"

#define BRAID_AVX512F \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

// 16 weights of a row from element i, as f32.
struct F32Row {
  static constexpr int kBytes = 4;
  BRAID_AVX512F static __m512 Load(const uint8_t* row, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
};
struct F16Row {
  static constexpr int kBytes = 2;
  BRAID_AVX512F static __m512 Load(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
};
struct BF16Row {
  static constexpr int kBytes = 2;
  BRAID_AVX512F static __m512 Load(const uint8_t* row, int64_t i) {
    const __m512i v = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
};

// Rows [0, R) (w, w_row_bytes apart) x tokens [0, T) (x, ld_x floats
// apart), R * T <= 24 accumulators; n a multiple of 16. y[t * ld_y + r] is set
// or, with accumulate, added to. next (or null): the next tile's R rows,
// prefetched into L1 a step's share at a time (the tiles' rows are not one
// sequential stream for the hardware prefetchers).
template <typename F, int R, int T>
BRAID_AVX512F void FloatTile(const uint8_t* w, size_t w_row_bytes,
                             const float* x, int64_t ld_x, int64_t n, float* y,
                             int64_t ld_y, bool accumulate,
                             const uint8_t* next) {
  static_assert(R * T <= 24, "tile shape");
  constexpr int kLines = (R * 16 * F::kBytes + 63) / 64;  // a step's share
  constexpr int kAcc = R * T <= 16 ? 16 : 32;             // whole groups of 16
  __m512 acc[kAcc];
#pragma GCC unroll 32
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    if (next != nullptr) {
#pragma GCC unroll 16
      for (int c = 0; c < kLines; ++c) {
        PrefetchL1(next + i * R * F::kBytes + 64 * c);
      }
    }
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = F::Load(w + r * w_row_bytes, i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ld_x + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc[r * T + t] = _mm512_fmadd_ps(wv[r], xv, acc[r * T + t]);
      }
    }
  }
  alignas(64) float sums[kAcc];
#pragma GCC unroll 2
  for (int g = 0; g < kAcc; g += 16) {
    _mm512_store_ps(sums + g, ReduceAdd16x16(acc + g));
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float& out = y[t * ld_y + r];
      out = accumulate ? out + sums[r * T + t] : sums[r * T + t];
    }
  }
}

// Rows [r0, r1) of T tokens: tiles of R rows, then single rows; each tile
// prefetches the next one's rows while they end before prefetch_end.
template <typename F, int R, int T>
BRAID_AVX512F void TileRows(const uint8_t* w, size_t w_row_bytes,
                            const float* x, int64_t ld_x, int64_t n, int64_t r0,
                            int64_t r1, float* y, int64_t ld_y, bool accumulate,
                            int64_t prefetch_end) {
  int64_t r = r0;
  for (; r + R <= r1; r += R) {
    FloatTile<F, R, T>(
        w + r * w_row_bytes, w_row_bytes, x, ld_x, n, y + r, ld_y, accumulate,
        r + 2 * R <= prefetch_end ? w + (r + R) * w_row_bytes : nullptr);
  }
  for (; r < r1; ++r) {
    FloatTile<F, 1, T>(w + r * w_row_bytes, w_row_bytes, x, ld_x, n, y + r,
                       ld_y, accumulate, nullptr);
  }
}

// Blocks of kBlockRows rows (kept in L2 while every group of tokens, each
// kept in L1, passes over them; the first group prefetches them); groups of
// 6 tokens while 6 are left (4 rows: 24 accumulators; against groups of 4,
// prefill 512 on the F16 SmolLM2 1714-1739 vs 1548-1707 tok/s, 8
// sequences 933-962 vs 884-913), then of up to 4; 4 rows a tile for one
// token (the one-token step is memory-bound), 8 for two, 4 for three or
// four.
constexpr int64_t kBlockRows = 64;

template <typename F>
BRAID_AVX512F void Run(const uint8_t* w, size_t w_row_bytes, const float* x,
                       int64_t ld_x, int64_t n, int64_t r0, int64_t r1,
                       int64_t n_tok, float* y, int64_t ld_y, bool accumulate) {
  for (int64_t b0 = r0; b0 < r1; b0 += kBlockRows) {
    const int64_t b1 = std::min(b0 + kBlockRows, r1);
    for (int64_t t0 = 0, group = 0; t0 < n_tok; t0 += group) {
      const float* xt = x + t0 * ld_x;
      float* yt = y + t0 * ld_y;
      group = n_tok - t0 >= 6 ? 6 : std::min<int64_t>(4, n_tok - t0);
      auto rows = [&](auto tile_rows) {
        tile_rows(w, w_row_bytes, xt, ld_x, n, b0, b1, yt, ld_y, accumulate,
                  t0 == 0 ? r1 : 0);
      };
      switch (group) {
        case 1:
          rows(TileRows<F, 4, 1>);
          break;
        case 2:
          rows(TileRows<F, 8, 2>);
          break;
        case 3:
          rows(TileRows<F, 4, 3>);
          break;
        case 4:
          rows(TileRows<F, 4, 4>);
          break;
        default:
          rows(TileRows<F, 4, 6>);
      }
    }
  }
}

}  // namespace

bool GemmFloatAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                     const float* x, size_t x_row_bytes, int64_t n, int64_t r0,
                     int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                     bool accumulate) {
  if (n % 16 != 0 || x_row_bytes % sizeof(float) != 0) return false;
  const int64_t ld_x = static_cast<int64_t>(x_row_bytes / sizeof(float));
  switch (type) {
    case DType::kF32:
      Run<F32Row>(w, w_row_bytes, x, ld_x, n, r0, r1, n_tok, y, ld_y,
                  accumulate);
      return true;
    case DType::kF16:
      Run<F16Row>(w, w_row_bytes, x, ld_x, n, r0, r1, n_tok, y, ld_y,
                  accumulate);
      return true;
    case DType::kBF16:
      Run<BF16Row>(w, w_row_bytes, x, ld_x, n, r0, r1, n_tok, y, ld_y,
                   accumulate);
      return true;
    default:
      return false;
  }
}

}  // namespace braid::kernels::cpu::internal
