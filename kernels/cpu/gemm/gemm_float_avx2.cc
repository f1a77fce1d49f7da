// AVX2 tiles for float weight rows (F32, F16, BF16) against f32 activations,
// for CPUs without AVX-512: R rows x T tokens, each (row, token) the two
// 8-lane accumulators of DotF32F32Avx2 / DotF16F32Avx2 / DotBF16F32Avx2
// (lanes 0..7 and 8..15 of dot.h's order for float rows), summed by
// ReduceAdd16: every output has DotRow's bits whatever the batch. A weight
// vector is loaded (and converted) once per step for the tile's T tokens.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"

#define BRAID_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

// 8 weights of a row from element i, as f32.
struct F32Row {
  static constexpr int kBytes = 4;
  BRAID_AVX2 static __m256 Load(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
};
struct F16Row {
  static constexpr int kBytes = 2;
  BRAID_AVX2 static __m256 Load(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
};
struct BF16Row {
  static constexpr int kBytes = 2;
  BRAID_AVX2 static __m256 Load(const uint8_t* row, int64_t i) {
    const __m256i v = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

// Rows [0, R) x tokens [0, T), n a multiple of 16; next (or null): the next
// tile's rows, prefetched into L1 a step's share at a time.
template <typename F, int R, int T>
BRAID_AVX2 void FloatTile(const uint8_t* w, size_t w_row_bytes, const float* x,
                          int64_t ld_x, int64_t n, float* y, int64_t ld_y,
                          bool accumulate, const uint8_t* next) {
  constexpr int kLines = (R * 16 * F::kBytes + 63) / 64;
  __m256 lo[R][T], hi[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n; i += 16) {
    if (next != nullptr) {
#pragma GCC unroll 8
      for (int c = 0; c < kLines; ++c) {
        PrefetchL1(next + i * R * F::kBytes + 64 * c);
      }
    }
    __m256 w0[R], w1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w0[r] = F::Load(w + r * w_row_bytes, i);
      w1[r] = F::Load(w + r * w_row_bytes, i + 8);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 x0 = _mm256_loadu_ps(x + t * ld_x + i);
      const __m256 x1 = _mm256_loadu_ps(x + t * ld_x + i + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        lo[r][t] = _mm256_fmadd_ps(w0[r], x0, lo[r][t]);
        hi[r][t] = _mm256_fmadd_ps(w1[r], x1, hi[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      const float v = ReduceAdd16(lo[r][t], hi[r][t]);
      float& out = y[t * ld_y + r];
      out = accumulate ? out + v : v;
    }
  }
}

// As gemm_float_avx512.cc's: rows [r0, r1) in tiles of R, then single rows;
// the next tile's rows prefetched while they end before prefetch_end.
template <typename F, int R, int T>
BRAID_AVX2 void TileRows(const uint8_t* w, size_t w_row_bytes, const float* x,
                         int64_t ld_x, int64_t n, int64_t r0, int64_t r1,
                         float* y, int64_t ld_y, bool accumulate,
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

// Blocks of 64 rows, groups of up to 4 tokens (16 ymm registers): 2 rows a
// tile for 1-2 tokens, 1 row (8 accumulators, the activations as the fmas'
// memory operands) for 3-4; prefill 512 on the F16 SmolLM2 549 tok/s
// against 493 with 2 x 2 tiles (`llama_bench --avx2`).
constexpr int64_t kBlockRows = 64;

template <typename F>
BRAID_AVX2 void Run(const uint8_t* w, size_t w_row_bytes, const float* x,
                    int64_t ld_x, int64_t n, int64_t r0, int64_t r1,
                    int64_t n_tok, float* y, int64_t ld_y, bool accumulate) {
  for (int64_t b0 = r0; b0 < r1; b0 += kBlockRows) {
    const int64_t b1 = std::min(b0 + kBlockRows, r1);
    for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
      const float* xt = x + t0 * ld_x;
      float* yt = y + t0 * ld_y;
      auto rows = [&](auto tile_rows) {
        tile_rows(w, w_row_bytes, xt, ld_x, n, b0, b1, yt, ld_y, accumulate,
                  t0 == 0 ? r1 : 0);
      };
      switch (std::min<int64_t>(4, n_tok - t0)) {
        case 1:
          rows(TileRows<F, 2, 1>);
          break;
        case 2:
          rows(TileRows<F, 2, 2>);
          break;
        case 3:
          rows(TileRows<F, 1, 3>);
          break;
        default:
          rows(TileRows<F, 1, 4>);
      }
    }
  }
}

}  // namespace

bool GemmFloatAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
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
