// AVX-512 + VNNI kernels of packed_gemm.h. A tile is one group of 16 rows x
// up to 8 tokens: per block the group's chunks are loaded (Q4_1: and
// unpacked into 8 vectors of nibbles) once, then for each token two chains
// of four dpbusd (a broadcast 4-byte group of the token's activations each)
// give the 16 rows' exact block sums, and one conversion and one fma (Q4_1:
// two) add the block to the token's 16 accumulators.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm/packed_gemm.h"
#include "kernels/cpu/prefetch.h"

#define BRAID_AVX512 \
  __attribute__((    \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

// Weights are prefetched this many bytes ahead of the block in use: far
// enough for DRAM latency at 8 tokens a tile (one thread streaming 64 MiB of
// Q4_1: 2 KB ahead 23 GB/s at one token, 15 at eight; 16 KB 34 and 23;
// gemm_tile_bench "packed from memory").
constexpr int64_t kAheadBytes = 16384;

BRAID_AVX512 inline __m512i Bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <bool kQ41, int T>
BRAID_AVX512 void Tile(const uint8_t* ws, const uint8_t* wc, int64_t nb,
                       const uint8_t* x, size_t x_row_bytes, const float* xd,
                       const float* xs, int64_t ld_s, float* y, int64_t ld_y,
                       bool accumulate) {
  constexpr DType kType = kQ41 ? DType::kQ4_1 : DType::kQ8_0;
  constexpr int64_t kSB = PackedScaleBytes(kType);  // scale bytes a block
  constexpr int64_t kCB = PackedChunkBytes(kType);  // chunk bytes a block
  constexpr int64_t kXB = kQ41 ? 36 : 34;           // activation block bytes
  constexpr int64_t kXQ = kQ41 ? 4 : 2;             // offset of its qs
  constexpr int64_t kChunks = kCB / 64;
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = wc + i * kCB;
    const uint8_t* sb = ws + i * kSB;
#pragma GCC unroll 16
    for (int64_t l = 0; l < kCB; l += 64) {
      PrefetchL1(b + kAheadBytes + l);
    }
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(sb)));
    __m512 mw = _mm512_setzero_ps();
    __m512i q[8];
    if constexpr (kQ41) {
      mw = _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 32)));
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i c = _mm512_load_si512(b + 64 * k);
        q[k] = _mm512_and_si512(c, low);
        q[k + 4] = _mm512_and_si512(_mm512_srli_epi16(c, 4), low);
      }
    } else {
#pragma GCC unroll 8
      for (int k = 0; k < kChunks; ++k) {
        q[k] = _mm512_load_si512(b + 64 * k);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xq = x + t * x_row_bytes + i * kXB + kXQ;
      const int64_t s = t * ld_s + i;
      __m512i s0 = _mm512_setzero_si512();
      if constexpr (!kQ41) {
        int32_t init;
        std::memcpy(&init, xs + s, 4);
        s0 = _mm512_set1_epi32(init);
      }
      __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        s0 = _mm512_dpbusd_epi32(s0, q[k], Bcast32(xq + 4 * k));
        s1 = _mm512_dpbusd_epi32(s1, q[k + 4], Bcast32(xq + 16 + 4 * k));
      }
      const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xd[s])), sum,
                               acc[t]);
      if constexpr (kQ41) {
        acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[s]), acc[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float* o = y + t * ld_y;
    __m512 v = acc[t];
    if (accumulate) v = _mm512_add_ps(_mm512_loadu_ps(o), v);
    _mm512_storeu_ps(o, v);
  }
}

template <bool kQ41>
BRAID_AVX512 void Run(const PackedWeights& w, const uint8_t* x,
                      size_t x_row_bytes, const float* tables, int64_t n_tok,
                      int64_t r0, int64_t r1, float* y, int64_t ld_y,
                      bool accumulate) {
  const int64_t nb = w.cols / kQK;
  const int64_t group_bytes = PackedGroupBytes(w.type, nb);
  const int64_t scale_area = PackedScaleAreaBytes(w.type, nb);
  const float* xd = tables;
  const float* xs = tables + n_tok * nb;
  for (int64_t g = r0 / kPackRows; g < r1 / kPackRows; ++g) {
    const uint8_t* ws = w.data.get() + g * group_bytes;
    const uint8_t* wc = ws + scale_area;
    float* yg = y + g * kPackRows;
    for (int64_t t = 0; t < n_tok; t += 8) {
      const int64_t nt = std::min<int64_t>(8, n_tok - t);
      auto run = [&](auto tile) {
        tile(ws, wc, nb, x + t * x_row_bytes, x_row_bytes, xd + t * nb,
             xs + t * nb, nb, yg + t * ld_y, ld_y, accumulate);
      };
      switch (nt) {
        case 1:
          run(Tile<kQ41, 1>);
          break;
        case 2:
          run(Tile<kQ41, 2>);
          break;
        case 3:
          run(Tile<kQ41, 3>);
          break;
        case 4:
          run(Tile<kQ41, 4>);
          break;
        case 5:
          run(Tile<kQ41, 5>);
          break;
        case 6:
          run(Tile<kQ41, 6>);
          break;
        case 7:
          run(Tile<kQ41, 7>);
          break;
        default:
          run(Tile<kQ41, 8>);
          break;
      }
    }
  }
}

}  // namespace

void PackedGemmAvx512(const PackedWeights& w, const uint8_t* x,
                      size_t x_row_bytes, const float* tables, int64_t n_tok,
                      int64_t r0, int64_t r1, float* y, int64_t ld_y,
                      bool accumulate) {
  if (w.type == DType::kQ4_1) {
    Run<true>(w, x, x_row_bytes, tables, n_tok, r0, r1, y, ld_y, accumulate);
  } else {
    Run<false>(w, x, x_row_bytes, tables, n_tok, r0, r1, y, ld_y, accumulate);
  }
}

}  // namespace braid::kernels::cpu::internal
