// AVX-512 tiles for GemmTile (Q4_1 and Q8_0 weights; AVX-512 F/BW/VL/DQ and
// VNNI). Each 512-bit accumulator holds the 8-lane accumulators of two output
// elements, rows r and r + 1 of one token: lanes are independent, so every
// element still gets, per block and in block order, its exact integer block
// sum (dpbusd), converted to float, times the float product d_w * d_x, fused
// into its own 8 lanes; then HorizontalSum8 of its half (and, for Q4_1, + its
// min-term sum, fma(m_w, s_x, summs) in block order). That is dot_avx2.cc's
// operation sequence, so results are bit-identical to DotRow; only the number
// of instructions per element changes (about half of the 256-bit tile's).
//
// Signed weights (Q8_0) go through dpbusd, which wants unsigned bytes, as
// w + 128: sum((w + 128) * x) - 128 * sum(x) is the same exact integer, so the
// accumulator starts at -128 * sum(x) of the token's group of 4 instead of 0.
//
// The activation scales are converted to f32 once per call and chunk of
// tokens (a table [block][token] on the stack), so the inner loop multiplies
// by a broadcast from memory.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/ggml_reduce.h"

#define BRAID_AVX512 \
  __attribute__((    \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX512 inline uint32_t Load32Bits(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q4_1 x Q8_1: weights are unsigned nibbles; each block has a min term.
struct Q41 {
  using W = BlockQ4_1;
  using X = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr bool kSigned = false;
  static constexpr int kQsOffset = 4;  // offsetof(BlockQ4_1, qs)
  static constexpr int kXQsOffset = 4;
  // Rows r and r + 1 of block i (at p and p + row_bytes) as unsigned bytes:
  // [r low nibbles, r high nibbles, r+1 low, r+1 high], ggml's element order.
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i q1 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + row_bytes));
    const __m512i q = _mm512_castsi256_si512(
        _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1));
    const __m512i dup = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi64(dup, shift),
                            _mm512_set1_epi8(0x0F));
  }
  // One row's block (qs at p) with every 32-bit group of ggml's element
  // order doubled: lanes 2k and 2k + 1 hold ggml's group k.
  BRAID_AVX512 static __m512i RowDup(const uint8_t* p) {
    const __m512i q = _mm512_castsi128_si512(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i idx =
        _mm512_set_epi32(3, 3, 2, 2, 1, 1, 0, 0, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    return _mm512_and_si512(
        _mm512_srlv_epi64(_mm512_permutexvar_epi32(idx, q), shift),
        _mm512_set1_epi8(0x0F));
  }
};

// Q8_0 x Q8_0: signed weights, offset by 128 (see the file comment).
struct Q80 {
  using W = BlockQ8_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kSigned = true;
  static constexpr int kQsOffset = 2;
  static constexpr int kXQsOffset = 2;
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + row_bytes));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  BRAID_AVX512 static __m512i RowDup(const uint8_t* p) {
    const __m512i q = _mm512_castsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i idx =
        _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm512_xor_si512(_mm512_permutexvar_epi32(idx, q),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// R rows (even) x T tokens. xd/xs: the tile's first token's column of the
// [block][token] scale tables (row stride ld_s); xs only for Q4_1.
template <typename F, int R, int T>
BRAID_AVX512 void Tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                       size_t x_row_bytes, const float* xd, const float* xs,
                       int64_t ld_s, int64_t nb, float* y, int64_t ld_y,
                       bool accumulate) {
  static_assert(R % 4 == 0, "rows come in groups of 4");
  constexpr int P = R / 2;  // row pairs
  constexpr int64_t kWB = sizeof(typename F::W);
  constexpr int64_t kXB = sizeof(typename F::X);
  __m512 acc[P][T];
  __m128 summs[R / 4][T];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int g = 0; g < R / 4; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) summs[g][t] = _mm_setzero_ps();
  }
  // Lanes 0..7 take element 2k of a vector, lanes 8..15 element 2k + 2.
  const __m512i pick01 =
      _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i pick23 =
      _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* wb = w + i * kWB;
    __m512i q[P];
    __m512 wd[P];
#pragma GCC unroll 8
    for (int g = 0; g < R / 4; ++g) {
      // (d, m) of 4 rows as f16 pairs (Q8_0: d and the first two quants,
      // which are ignored) -> f32 [d0 m0 d1 m1 d2 m2 d3 m3].
      const uint8_t* b = wb + 4 * g * w_row_bytes;
      const __m128i dm16 =
          _mm_set_epi32(static_cast<int>(Load32Bits(b + 3 * w_row_bytes)),
                        static_cast<int>(Load32Bits(b + 2 * w_row_bytes)),
                        static_cast<int>(Load32Bits(b + w_row_bytes)),
                        static_cast<int>(Load32Bits(b)));
      const __m256 dm8 = _mm256_cvtph_ps(dm16);
      const __m512 dm = _mm512_castps256_ps512(dm8);
      wd[2 * g] = _mm512_permutexvar_ps(pick01, dm);
      wd[2 * g + 1] = _mm512_permutexvar_ps(pick23, dm);
      if constexpr (F::kMin) {
        const __m128 m = _mm_shuffle_ps(_mm256_castps256_ps128(dm8),
                                        _mm256_extractf128_ps(dm8, 1),
                                        _MM_SHUFFLE(3, 1, 3, 1));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          summs[g][t] =
              _mm_fmadd_ps(m, _mm_set1_ps(xs[i * ld_s + t]), summs[g][t]);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        q[2 * g + h] =
            F::Pair(b + (2 * h) * w_row_bytes + F::kQsOffset, w_row_bytes);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + t * x_row_bytes + i * kXB + F::kXQsOffset;
      const __m512i xq = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb)));
      __m512i init = _mm512_setzero_si512();
      if constexpr (F::kSigned) {
        init = _mm512_sub_epi32(
            init,
            _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                _mm512_set1_epi8(static_cast<char>(0x80)), xq));
      }
      const __m512 xdv = _mm512_set1_ps(xd[i * ld_s + t]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m512 sum =
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(init, q[p], xq));
        acc[p][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd[p], xdv), sum, acc[p][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      float v[2] = {HorizontalSum8(_mm512_extractf32x8_ps(acc[p][t], 0)),
                    HorizontalSum8(_mm512_extractf32x8_ps(acc[p][t], 1))};
      if constexpr (F::kMin) {
        float m[4];
        _mm_storeu_ps(m, summs[p / 2][t]);
        v[0] = v[0] + m[2 * (p % 2)];
        v[1] = v[1] + m[2 * (p % 2) + 1];
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        float& out = y[t * ld_y + 2 * p + h];
        out = accumulate ? out + v[h] : v[h];
      }
    }
  }
}

// Token-pair tiles (batches of 3+ tokens). A 512-bit accumulator holds two
// output elements of one row, tokens t and t + 1, interleaved: lane 2k is
// ggml's accumulator lane k of (r, t), lane 2k + 1 that of (r, t + 1). The
// activations of a token pair are laid out once per call the same way (xp:
// 32-bit groups of t and t + 1 alternating), each weight row's block once per
// tile with its groups doubled (RowDup), so one dpbusd gives both elements'
// exact integer block sums. The two float products d_w * d_x(t) and
// d_w * d_x(t + 1) are adjacent in a table computed ahead for a segment of
// blocks (16 products per multiply), so the fma takes them as one 64-bit
// broadcast load: per element pair and block the vector pipes see dpbusd,
// the conversion and the fma, and no multiply. Per element the operations are
// still the row dot's, in block order (see the file comment), and Q4_1's min
// term is fma(m_w, s_x, summs) in block order, 16 elements per fma.
template <typename F, int R, int TP>
BRAID_AVX512 void PairTile(const uint8_t* w, size_t w_row_bytes,
                           const uint8_t* xp, const uint8_t* xinit,
                           int64_t pair_stride, const float* xd,
                           const float* xs, int64_t ld_s, int64_t nb,
                           int n_valid, float* y, int64_t ld_y,
                           bool accumulate) {
  static_assert(R % 4 == 0 && TP >= 1 && TP <= 4, "tile shape");
  constexpr int P = R / 2;
  constexpr int64_t kWB = sizeof(typename F::W);
  constexpr int kSeg = 16;
  // prod[s][p]: lanes 0..7 = d_w(row 2p) * d_x(t), 8..15 row 2p + 1.
  alignas(64) float prod[kSeg][P][16];
  __m512 acc[R][TP];
  __m512 summs[P];  // Same layout as prod.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int tp = 0; tp < TP; ++tp) acc[r][tp] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) summs[p] = _mm512_setzero_ps();
  const __m512i pick01 =
      _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i pick23 =
      _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m512i pickm01 =
      _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i pickm23 =
      _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5, 5);
  const __mmask8 tok_mask = static_cast<__mmask8>((1u << n_valid) - 1);
  for (int64_t i0 = 0; i0 < nb; i0 += kSeg) {
    const int ns = static_cast<int>(std::min<int64_t>(kSeg, nb - i0));
    for (int s = 0; s < ns; ++s) {
      const int64_t i = i0 + s;
      const __m512 xdv = _mm512_broadcast_f32x8(
          _mm256_maskz_loadu_ps(tok_mask, xd + i * ld_s));
      __m512 xsv = _mm512_setzero_ps();
      if constexpr (F::kMin) {
        xsv = _mm512_broadcast_f32x8(
            _mm256_maskz_loadu_ps(tok_mask, xs + i * ld_s));
      }
#pragma GCC unroll 4
      for (int g = 0; g < R / 4; ++g) {
        const uint8_t* b = w + i * kWB + 4 * g * w_row_bytes;
        const __m128i dm16 =
            _mm_set_epi32(static_cast<int>(Load32Bits(b + 3 * w_row_bytes)),
                          static_cast<int>(Load32Bits(b + 2 * w_row_bytes)),
                          static_cast<int>(Load32Bits(b + w_row_bytes)),
                          static_cast<int>(Load32Bits(b)));
        const __m512 dm = _mm512_castps256_ps512(_mm256_cvtph_ps(dm16));
        _mm512_store_ps(prod[s][2 * g],
                        _mm512_mul_ps(_mm512_permutexvar_ps(pick01, dm), xdv));
        _mm512_store_ps(prod[s][2 * g + 1],
                        _mm512_mul_ps(_mm512_permutexvar_ps(pick23, dm), xdv));
        if constexpr (F::kMin) {
          summs[2 * g] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pickm01, dm),
                                         xsv, summs[2 * g]);
          summs[2 * g + 1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pickm23, dm),
                                             xsv, summs[2 * g + 1]);
        }
      }
    }
    for (int s = 0; s < ns; ++s) {
      const int64_t i = i0 + s;
      __m512i q[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        q[r] = F::RowDup(w + r * w_row_bytes + i * kWB + F::kQsOffset);
      }
#pragma GCC unroll 4
      for (int tp = 0; tp < TP; ++tp) {
        const int64_t off = tp * pair_stride + i * 64;
        const __m512i xv = _mm512_load_si512(xp + off);
        __m512i start = _mm512_setzero_si512();
        if constexpr (F::kSigned) start = _mm512_load_si512(xinit + off);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512 sum =
              _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, q[r], xv));
          double pr;
          std::memcpy(&pr, &prod[s][r / 2][(r % 2) * 8 + 2 * tp], 8);
          acc[r][tp] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr)),
                                       sum, acc[r][tp]);
        }
      }
    }
  }
  const __m512i even =
      _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    alignas(64) float m[16];
    _mm512_store_ps(m, summs[p]);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int r = 2 * p + h;
#pragma GCC unroll 4
      for (int tp = 0; tp < TP; ++tp) {
        // Lanes 0..7: token 2tp's 8 lanes; 8..15: token 2tp + 1's.
        const __m512 a = _mm512_permutexvar_ps(even, acc[r][tp]);
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
          const int t = 2 * tp + u;
          if (t >= n_valid) break;
          float v = HorizontalSum8(_mm512_extractf32x8_ps(a, u));
          if constexpr (F::kMin) v = v + m[8 * h + t];
          float& out = y[t * ld_y + r];
          out = accumulate ? out + v : v;
        }
      }
    }
  }
}

// Lays out a chunk of nc tokens' activation blocks in token pairs (xp, see
// PairTile; an odd last token is paired with zeros) and, for signed weights,
// each pair block's dpbusd start value -128 * sum(x) per lane (xinit).
template <typename F>
BRAID_AVX512 void LayOutPairs(const uint8_t* x, size_t x_row_bytes, int64_t nc,
                              int64_t nb, uint8_t* xp, uint8_t* xinit) {
  constexpr int64_t kXB = sizeof(typename F::X);
  const __m512i inter =
      _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t t = 0; t < nc; t += 2) {
    const uint8_t* a = x + t * x_row_bytes + F::kXQsOffset;
    const uint8_t* b = a + x_row_bytes;
    uint8_t* out = xp + (t / 2) * nb * 64;
    uint8_t* init = xinit + (t / 2) * nb * 64;
    for (int64_t i = 0; i < nb; ++i) {
      const __m512i va = _mm512_castsi256_si512(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i * kXB)));
      const __m512i vb =
          t + 1 < nc ? _mm512_castsi256_si512(_mm256_loadu_si256(
                           reinterpret_cast<const __m256i*>(b + i * kXB)))
                     : _mm512_setzero_si512();
      const __m512i v = _mm512_permutex2var_epi32(va, inter, vb);
      _mm512_store_si512(out + i * 64, v);
      if constexpr (F::kSigned) {
        const __m512i off =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                _mm512_set1_epi8(static_cast<char>(0x80)), v);
        _mm512_store_si512(init + i * 64,
                           _mm512_sub_epi32(_mm512_setzero_si512(), off));
      }
    }
  }
}

template <typename F>
BRAID_AVX512 void RunPairRows(const uint8_t* w, size_t w_row_bytes,
                              const uint8_t* xp, const uint8_t* xinit,
                              const float* xd, const float* xs, int64_t ld_s,
                              int64_t nb, int64_t r, int64_t n_tok, float* y,
                              int64_t ld_y, bool accumulate) {
  constexpr int R = 4;
  const uint8_t* wr = w + r * w_row_bytes;
  const int64_t stride = nb * 64;
  for (int64_t t = 0; t < n_tok; t += 8) {
    const int n_valid = static_cast<int>(std::min<int64_t>(8, n_tok - t));
    const int64_t o = (t / 2) * stride;
    auto run = [&](auto tile) {
      tile(wr, w_row_bytes, xp + o, xinit + o, stride, xd + t, xs + t, ld_s, nb,
           n_valid, y + t * ld_y + r, ld_y, accumulate);
    };
    if (n_valid > 6) {
      run(PairTile<F, R, 4>);
    } else if (n_valid > 4) {
      run(PairTile<F, R, 3>);
    } else if (n_valid > 2) {
      run(PairTile<F, R, 2>);
    } else {
      run(PairTile<F, R, 1>);
    }
  }
}

bool g_disable_pair_tiles = false;

// How far ahead (in tiles) weights are prefetched into L2.
constexpr int64_t kFarTiles = 8;

// Tokens per chunk whose scale tables fit the stack buffers.
constexpr int64_t kScaleFloats = 4096;

template <typename F, int R>
BRAID_AVX512 void RunRows(const uint8_t* w, size_t w_row_bytes,
                          const uint8_t* x, size_t x_row_bytes, const float* xd,
                          const float* xs, int64_t ld_s, int64_t nb, int64_t r,
                          int64_t n_tok, float* y, int64_t ld_y,
                          bool accumulate) {
  const uint8_t* wr = w + r * w_row_bytes;
  int64_t t = 0;
  constexpr int kT = R == 4 ? 8 : 4;
  for (; t + kT <= n_tok; t += kT) {
    Tile<F, R, kT>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes, xd + t,
                   xs + t, ld_s, nb, y + t * ld_y + r, ld_y, accumulate);
  }
  if (kT > 4 && t + 4 <= n_tok) {
    Tile<F, R, 4>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes, xd + t,
                  xs + t, ld_s, nb, y + t * ld_y + r, ld_y, accumulate);
    t += 4;
  }
  if (t + 2 <= n_tok) {
    Tile<F, R, 2>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes, xd + t,
                  xs + t, ld_s, nb, y + t * ld_y + r, ld_y, accumulate);
    t += 2;
  }
  if (t < n_tok) {
    Tile<F, R, 1>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes, xd + t,
                  xs + t, ld_s, nb, y + t * ld_y + r, ld_y, accumulate);
  }
}

// Design: the task's rows are walked in tiles of R (8 for decode-sized
// batches: more independent weight streams; 4 otherwise, with 8 tokens per
// tile so a weight block is unpacked once for 8 tokens). Tokens go in chunks
// whose f32 scale tables fit on the stack; the rows of a task (a few KB to a
// few hundred KB) are reread from cache for each chunk. Rows left over (fewer
// than 4) go to the AVX2 tiles, which give the same bits.
// Tokens per chunk whose scale tables fit kScaleFloats (see Run).
int64_t ChunkTokens(int64_t nb) {
  int64_t chunk =
      std::min<int64_t>(64, kScaleFloats / std::max<int64_t>(nb, 1));
  return std::max<int64_t>(chunk / 8 * 8, 1);
}

// The per-chunk activation tables of nc tokens (row stride x_row_bytes):
// f32 scales [block][token] (xd; Q4_1's sums in xs) and, for the token-pair
// tiles, the pair layout (xp; signed weights' start values in xinit).
template <typename F>
BRAID_AVX512 void PrepareChunk(const uint8_t* xc, size_t x_row_bytes,
                               int64_t nc, int64_t nb, bool pairs, float* xd,
                               float* xs, uint8_t* xp, uint8_t* xinit) {
  constexpr int64_t kXB = sizeof(typename F::X);
  for (int64_t t = 0; t < nc; ++t) {
    const uint8_t* xt = xc + t * x_row_bytes;
    for (int64_t i = 0; i < nb; ++i) {
      uint16_t h[2];
      std::memcpy(h, xt + i * kXB, 4);
      xd[i * nc + t] = _cvtsh_ss(h[0]);
      if constexpr (F::kMin) xs[i * nc + t] = _cvtsh_ss(h[1]);
    }
  }
  if (pairs) LayOutPairs<F>(xc, x_row_bytes, nc, nb, xp, xinit);
}

template <typename F>
BRAID_AVX512 void Run(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
                      int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
                      DType type, const GemmTileActivations* prepared) {
  const int64_t nb = n / kQK;

  alignas(64) float xd[kScaleFloats];
  alignas(64) float xs[F::kMin ? kScaleFloats : 1];
  const int64_t chunk = ChunkTokens(nb);
  if (nb * chunk > kScaleFloats) {  // Rows too long for the tables.
    GemmTileAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                 ld_y, accumulate);
    return;
  }
  // Batches of 3+ tokens take the token-pair tiles (4 rows each); for two
  // tokens their single pair leaves too few independent chains.
  const bool pairs = n_tok >= 3 && !g_disable_pair_tiles;
  const int R = pairs ? 4 : n_tok < 4 ? 8 : 4;
  const int64_t r_end = r0 + (r1 - r0) / R * R;
  // Tables laid out once for the whole call (one chunk of tokens), or
  // here, per chunk.
  const bool use_prepared = prepared != nullptr && prepared->n_tok == n_tok &&
                            n_tok <= chunk &&
                            (!pairs || prepared->xp != nullptr);
  thread_local std::vector<uint8_t> xp_buf, xinit_buf;
  if (pairs && !use_prepared) {
    const size_t need = static_cast<size_t>((chunk + 1) / 2) * nb * 64 + 64;
    if (xp_buf.size() < need) xp_buf.resize(need);
    if (F::kSigned && xinit_buf.size() < need) xinit_buf.resize(need);
  }
  // 64-byte aligned views of the pair tables.
  auto align64 = [](uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) &
                                      ~uintptr_t{63});
  };
  uint8_t* xp = pairs ? align64(xp_buf.data()) : nullptr;
  uint8_t* xinit = pairs && F::kSigned ? align64(xinit_buf.data()) : xp;
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int64_t nc = std::min(chunk, n_tok - t0);
    const uint8_t* xc = x + t0 * x_row_bytes;
    const float* cxd = xd;
    const float* cxs = xs;
    const uint8_t* cxp = xp;
    const uint8_t* cxinit = xinit;
    if (use_prepared) {
      cxd = prepared->xd;
      cxs = prepared->xs;
      cxp = prepared->xp;
      cxinit = prepared->xinit;
    } else {
      PrepareChunk<F>(xc, x_row_bytes, nc, nb, pairs, xd, xs, xp, xinit);
    }
    float* yc = y + t0 * ld_y;
    for (int64_t r = r0; r < r_end; r += R) {
      // The rows stream from memory once: on the first chunk, fetch the
      // next tile's ahead.
      if (t0 == 0) {
        const uint8_t* ahead = w + (r + R) * w_row_bytes;
        const uint8_t* ahead_end = w + r1 * w_row_bytes;
        const size_t bytes = std::min<size_t>(
            R * w_row_bytes, ahead_end - std::min(ahead, ahead_end));
        for (size_t off = 0; off < bytes; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
        }
        // And the tile kFarTiles ahead into L2, so its DRAM latency
        // overlaps several tiles' arithmetic (8-sequence decode ~3%
        // faster, best of 5 alternating runs; one stream unchanged).
        const uint8_t* far = w + (r + kFarTiles * R) * w_row_bytes;
        const uint8_t* far_end = std::min(far + R * w_row_bytes, ahead_end);
        for (const uint8_t* p = far; p < far_end; p += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
        }
      }
      if (pairs) {
        RunPairRows<F>(w, w_row_bytes, cxp, cxinit, cxd, cxs, nc, nb, r, nc, yc,
                       ld_y, accumulate);
      } else if (R == 8) {
        RunRows<F, 8>(w, w_row_bytes, xc, x_row_bytes, cxd, cxs, nc, nb, r, nc,
                      yc, ld_y, accumulate);
      } else {
        RunRows<F, 4>(w, w_row_bytes, xc, x_row_bytes, cxd, cxs, nc, nb, r, nc,
                      yc, ld_y, accumulate);
      }
    }
    if (r_end < r1) {
      GemmTileAvx2(type, w, w_row_bytes, xc, x_row_bytes, n, r_end, r1, nc, yc,
                   ld_y, accumulate);
    }
  }
}

}  // namespace

void SetDisablePairTilesForTesting(bool disable) {
  g_disable_pair_tiles = disable;
}

bool GemmTileAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate, const GemmTileActivations* prepared) {
  switch (type) {
    case DType::kQ4_1:
      Run<Q41>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared);
      return true;
    case DType::kQ8_0:
      Run<Q80>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared);
      return true;
    default:
      return false;
  }
}

namespace {

// Bytes of each prepared table (64-byte multiples), or false when the
// AVX-512 tiles would not take prepared tables for this call.
struct TableSizes {
  size_t scales = 0, pairs = 0;
};
bool PreparedSizes(DType type, int64_t n, int64_t n_tok, TableSizes* out) {
  if (type != DType::kQ4_1 && type != DType::kQ8_0) return false;
  const int64_t nb = n / kQK;
  if (n_tok < 1 || n_tok > ChunkTokens(nb) ||
      nb * ChunkTokens(nb) > kScaleFloats) {
    return false;
  }
  auto round64 = [](size_t b) { return (b + 63) / 64 * 64; };
  out->scales = round64(static_cast<size_t>(nb * n_tok) * sizeof(float));
  out->pairs = n_tok >= 3 ? static_cast<size_t>((n_tok + 1) / 2) * nb * 64 : 0;
  return true;
}

}  // namespace

size_t GemmTileActivationsBytesAvx512(DType type, int64_t n, int64_t n_tok) {
  TableSizes t;
  if (!PreparedSizes(type, n, n_tok, &t)) return 0;
  return 2 * t.scales + 2 * t.pairs + 64;  // + alignment
}

BRAID_AVX512 bool PrepareGemmTileActivationsAvx512(DType type, const uint8_t* x,
                                                   size_t x_row_bytes,
                                                   int64_t n, int64_t n_tok,
                                                   uint8_t* buf,
                                                   GemmTileActivations* out) {
  TableSizes t;
  if (!PreparedSizes(type, n, n_tok, &t)) return false;
  uint8_t* p = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(buf) + 63) & ~uintptr_t{63});
  float* xd = reinterpret_cast<float*>(p);
  float* xs = reinterpret_cast<float*>(p + t.scales);
  uint8_t* xp = p + 2 * t.scales;
  uint8_t* xinit = xp + t.pairs;
  const int64_t nb = n / kQK;
  const bool pairs = n_tok >= 3;
  if (type == DType::kQ4_1) {
    PrepareChunk<Q41>(x, x_row_bytes, n_tok, nb, pairs, xd, xs, xp, xinit);
  } else {
    PrepareChunk<Q80>(x, x_row_bytes, n_tok, nb, pairs, xd, xs, xp, xinit);
  }
  *out = GemmTileActivations{xd, xs, pairs ? xp : nullptr,
                             pairs ? xinit : nullptr, n_tok};
  return true;
}

}  // namespace braid::kernels::cpu::internal
