// AVX-512 tiles for weights in the quad layout (RepackQuads, gemm_tile.h):
// quad tiles for 3+ tokens and row-quad tiles for 1 or 2, with the
// activation tables they read; each element bit-identical to DotRow (see
// gemm_tile_avx512.cc's file comment for the arithmetic they keep).
#include "kernels/cpu/gemm/gemm_quads_avx512.h"

#include <immintrin.h>

#include "kernels/cpu/prefetch.h"

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593), and -Wuninitialized on
// _mm512_shuffle_f32x4's.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm/gemm_avx512_blocks.h"
#include "kernels/cpu/gemm/scale_ring.h"

namespace braid::kernels::cpu::internal {
namespace {

// Quad tiles, on weights in the quad layout (RepackQuads), batches of 3+
// tokens: 4 rows x T tokens (T = 4 or 8). A 512-bit accumulator holds two
// rows r and r + 1 of one token, interleaved: lane 2k is ggml's accumulator
// lane k of (r, t), lane 2k + 1 that of (r + 1, t). The layout stores the
// two rows' quants interleaved the same way (F::QuadPair unpacks them with
// one shift and mask), and each token's activation block is laid out once
// per call with its 32-bit groups doubled (LayOutQuads), so one dpbusd
// gives both elements' exact integer block sums, and a weight block is
// unpacked once for the T tokens. The products d_w(r) * d_x(t) and
// d_w(r + 1) * d_x(t) are adjacent in a table computed a block ahead (16
// products per multiply, from the 4 rows' scales, one load, and the
// activations' scales laid out 4 times each, dpat), so the fma takes them
// as one 64-bit broadcast: per element pair and block the vector
// pipes see dpbusd, the conversion and the fma. Per element the operations
// are still the row dot's, in block order (see the file comment); Q4_1's
// min term is fma(m_w, s_x, summs) in block order, 16 elements per fma. The
// 8-lane sums are HorizontalSum8's tree done on 16 accumulators at once
// (QuadSums).
//
// Activation tables (per call or chunk of tokens) come in quads of 4
// tokens, tokens past the end zero: xq [quad][block][token][64 bytes] (Q8_0:
// x + 128, unsigned), dpat and spat [quad][block][token][4 floats].

// HorizontalSum8 of every (row, token) of a quad tile's accumulators
// a[0][j] (rows 0 and 1, token j) and a[1][j] (rows 2 and 3), j < 4, each
// sum with exactly HorizontalSum8's additions: lanes k + (k + 4), then
// those of k and k + 2, then the two. 128-bit lane j of the result holds
// token j's rows 0..3.
BRAID_AVX512 inline __m512 QuadLevel1(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44),
                       _mm512_shuffle_f32x4(a, b, 0xEE));
}
BRAID_AVX512 inline __m512 QuadLevel2(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88),
                       _mm512_shuffle_f32x4(a, b, 0xDD));
}
BRAID_AVX512 inline __m512 QuadSums(const __m512* a0, const __m512* a1) {
  const __m512 p =
      QuadLevel2(QuadLevel1(a0[0], a0[1]), QuadLevel1(a0[2], a0[3]));
  const __m512 q =
      QuadLevel2(QuadLevel1(a1[0], a1[1]), QuadLevel1(a1[2], a1[3]));
  return _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
}

// The tiles' scale work runs kScalesAhead blocks ahead of the products that
// use it (scale_ring.h). Against a pass over a segment of 24 blocks before
// their products (which touched every weight line of the tile at once, the
// scales being at the head of each block), one block ahead was,
// step-interleaved in process: one stream 5.3-7.2% less a step, 2 sequences
// 4.2-5.2%, 4 sequences 2.4-4.7%, 8 sequences 0.7-2.0%.

// Prefetch spread over a tile's nb blocks: at block i, its share of
// near_bytes from near (the next tile's rows, into L1) and of far_bytes from
// far (rows further ahead, into L2). Against the same lines fetched in one
// burst before each tile, step-interleaved in process: 4 and 8 sequences
// 5-12% faster a step (quad tiles), one stream 4-6.5% (row-quad tiles): a
// burst of prefetches outruns the line-fill buffers and stalls the
// arithmetic. A tile of `rows` rows of `block_bytes` blocks takes
// kLines = ceil(rows * block_bytes / 64) lines of each region a block, a
// compile-time count and one bounds check per region and block (the last
// block of a region may fetch up to kLines - 1 lines past it): against a
// loop with a check per line, step-interleaved in process (two core
// complexes), 4 sequences 1.3-5.0% less a step in 9 runs, 2 sequences
// 1.1-3.6%, 8 sequences 1.2-1.8%, one stream unchanged (-2.1 to +1.9%;
// the same runs with both halves the old code move 1-3%).
class SpreadPrefetch {
 public:
  BRAID_AVX512 SpreadPrefetch(const uint8_t* near, int64_t near_bytes,
                              const uint8_t* far, int64_t far_bytes)
      : near_(near),
        far_(far),
        near_bytes_(near_bytes),
        far_bytes_(far_bytes) {}
  // kLines: ceil(the tile's bytes a block / 64).
  template <int kLines>
  BRAID_AVX512 void Block(int64_t i) const {
    const int64_t b0 = i * 64 * kLines;
    if (b0 < near_bytes_) {
#pragma GCC unroll 16
      for (int c = 0; c < kLines; ++c) PrefetchL1(near_ + b0 + 64 * c);
    }
    if (b0 < far_bytes_) {
#pragma GCC unroll 16
      for (int c = 0; c < kLines; ++c) PrefetchL2(far_ + b0 + 64 * c);
    }
  }

 private:
  const uint8_t* near_;
  const uint8_t* far_;
  int64_t near_bytes_, far_bytes_;
};

// A quad tile's 4 rows x T tokens (U = T / 4 quads of tokens), the first
// n_valid tokens stored into (or added to) y: QuadSums of the row pairs'
// accumulators, plus Q4_1's min terms.
template <typename F, int T>
BRAID_AVX512 inline __attribute__((always_inline)) void StoreQuadTile(
    __m512 (&acc)[2][T], __m512 (&summs)[T / 4], int n_valid, float* y,
    int64_t ld_y, bool accumulate) {
#pragma GCC unroll 2
  for (int u = 0; u < T / 4; ++u) {
    __m512 v = QuadSums(&acc[0][4 * u], &acc[1][4 * u]);
    if constexpr (F::kMin) v = _mm512_add_ps(v, summs[u]);
    alignas(64) float out[16];
    _mm512_store_ps(out, v);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int t = 4 * u + j;
      if (t >= n_valid) break;
      float* dst = y + t * ld_y;
      __m128 r = _mm_load_ps(out + 4 * j);
      if (accumulate) r = _mm_add_ps(_mm_loadu_ps(dst), r);
      _mm_storeu_ps(dst, r);
    }
  }
}

// w: 4 rows in the quad layout (RepackQuads), block i at w + 4 * i *
// sizeof(block); pf: its SpreadPrefetch.
template <typename F, int T>
BRAID_AVX512 void QuadTile(const uint8_t* w, const uint8_t* xq,
                           int64_t quad_bytes, const float* dpat,
                           const float* spat, int64_t quad_floats, int64_t nb,
                           int n_valid, float* y, int64_t ld_y, bool accumulate,
                           const SpreadPrefetch& pf) {
  static_assert(T == 4 || T == 8, "tile shape");
  constexpr int U = T / 4;  // quads
  constexpr int64_t kWB = sizeof(typename F::W);
  // prod[RingSlot(i)][4t + r] = d_w(r) * d_x(t) at block i.
  alignas(64) float prod[kScaleRing][4 * T];
  __m512 acc[2][T];
  __m512 summs[U];  // [t][r], like prod.
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[0][t] = _mm512_setzero_ps();
    acc[1][t] = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int u = 0; u < U; ++u) summs[u] = _mm512_setzero_ps();
  // Of [d0 m0 d1 m1 d2 m2 d3 m3]: d0..d3 (m0..m3) four times.
  const __m512i pick_d =
      _mm512_set_epi32(6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0);
  const __m512i pick_m =
      _mm512_set_epi32(7, 5, 3, 1, 7, 5, 3, 1, 7, 5, 3, 1, 7, 5, 3, 1);
  // Block i's products into prod[RingSlot(i)], its min terms into summs.
  auto scales = [&](int64_t i) BRAID_AVX512 {
    const __m512 dm = F::QuadScales(w + 4 * i * kWB);
    const __m512 dw = _mm512_permutexvar_ps(pick_d, dm);
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) {
      _mm512_store_ps(
          prod[RingSlot(i)] + 16 * u,
          _mm512_mul_ps(dw, _mm512_load_ps(dpat + u * quad_floats + i * 16)));
    }
    if constexpr (F::kMin) {
      const __m512 mw = _mm512_permutexvar_ps(pick_m, dm);
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) {
        summs[u] = _mm512_fmadd_ps(
            mw, _mm512_load_ps(spat + u * quad_floats + i * 16), summs[u]);
      }
    }
  };
  for (int64_t i = 0; i < std::min(kScalesAhead, nb); ++i) scales(i);
  for (int64_t i = 0; i < nb; ++i) {
    if (i + kScalesAhead < nb) scales(i + kScalesAhead);
    pf.Block<(4 * kWB + 63) / 64>(i);
    const __m512i q0 = F::QuadPair(w + 4 * i * kWB, 0);
    const __m512i q1 = F::QuadPair(w + 4 * i * kWB, 1);
    // Signed weights: the activations are x + 128 (unsigned), so each
    // lane starts at -128 * sum(w) of its group.
    __m512i start0 = _mm512_setzero_si512(), start1 = start0;
    if constexpr (F::kSigned) {
      const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
      start0 = _mm512_sub_epi32(start0, _mm512_dpbusd_epi32(start0, k128, q0));
      start1 = _mm512_sub_epi32(start1, _mm512_dpbusd_epi32(start1, k128, q1));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int64_t off = (t / 4) * quad_bytes + (i * 4 + t % 4) * 64;
      const __m512i xv = _mm512_load_si512(xq + off);
      double pr[2];
      std::memcpy(pr, &prod[RingSlot(i)][4 * t], 16);
      acc[0][t] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr[0])),
                                  _mm512_cvtepi32_ps(F::Dot(start0, q0, xv)),
                                  acc[0][t]);
      acc[1][t] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr[1])),
                                  _mm512_cvtepi32_ps(F::Dot(start1, q1, xv)),
                                  acc[1][t]);
    }
  }
  StoreQuadTile<F, T>(acc, summs, n_valid, y, ld_y, accumulate);
}

// Lays out blocks [b0, b1) of tokens [t0, t1) of a chunk of nc tokens'
// activations in quads (see QuadTile): each block's 32-bit groups doubled
// (xq; signed weights' activations + 128), and the scales (and Q4_1's sums)
// four times each (dpat, spat); with t1 == nc also the last quad's tokens
// past nc, as zeros.
template <typename F>
BRAID_AVX512 void LayOutQuads(const uint8_t* x, size_t x_row_bytes, int64_t nc,
                              int64_t nb, int64_t t0, int64_t t1, int64_t b0,
                              int64_t b1, uint8_t* xq, float* dpat,
                              float* spat) {
  constexpr int64_t kXB = sizeof(typename F::X);
  const __m512i dup =
      _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const int64_t end = t1 == nc ? (nc + 3) / 4 * 4 : t1;
  for (int64_t t = t0; t < end; ++t) {
    const int64_t qd = t / 4, j = t % 4;
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t at = (qd * nb + i) * 4 + j;
      __m512i v = _mm512_setzero_si512();
      float d = 0.0f, s = 0.0f;
      if (t < nc) {
        const uint8_t* xb = x + t * x_row_bytes + i * kXB;
        v = _mm512_permutexvar_epi32(
            dup, _mm512_castsi256_si512(_mm256_loadu_si256(
                     reinterpret_cast<const __m256i*>(xb + F::kXQsOffset))));
        if constexpr (F::kSigned) {
          v = _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
        }
        uint16_t h[2];
        std::memcpy(h, xb, 4);
        d = _cvtsh_ss(h[0]);
        s = _cvtsh_ss(h[1]);
      }
      _mm512_store_si512(xq + at * 64, v);
      _mm_store_ps(dpat + at * 4, _mm_set1_ps(d));
      if constexpr (F::kMin) _mm_store_ps(spat + at * 4, _mm_set1_ps(s));
    }
  }
}

// Rows [r, r + 4) for the chunk's nc tokens: tiles of 8 tokens (two quads),
// and one of 4 for a last single quad.
template <typename F>
BRAID_AVX512 void RunQuadRows(const uint8_t* w, size_t w_row_bytes,
                              const uint8_t* xq, const float* dpat,
                              const float* spat, int64_t nb, int64_t r,
                              int64_t nc, float* y, int64_t ld_y,
                              bool accumulate, const uint8_t* near,
                              int64_t near_bytes, const uint8_t* far,
                              int64_t far_bytes) {
  const uint8_t* wr = w + r * w_row_bytes;
  const int64_t quad_bytes = nb * 4 * 64;
  const int64_t quad_floats = nb * 16;
  for (int64_t t = 0; t < nc; t += 8) {
    const int n_valid = static_cast<int>(std::min<int64_t>(8, nc - t));
    const int64_t qd = t / 4;
    auto run = [&](auto tile) {
      tile(wr, xq + qd * quad_bytes, quad_bytes, dpat + qd * quad_floats,
           spat + qd * quad_floats, quad_floats, nb, n_valid, y + t * ld_y + r,
           ld_y, accumulate,
           SpreadPrefetch(near, t == 0 ? near_bytes : 0, far,
                          t == 0 ? far_bytes : 0));
    };
    if (n_valid > 4) {
      run(QuadTile<F, 8>);
    } else {
      run(QuadTile<F, 4>);
    }
  }
}

// Batches of 1 or 2 tokens (Q = 4 or 1) and of 3 or 4 (T = 4, Q = 2) on
// the quad layout: 4Q rows (Q quads) x T tokens of the first quad of
// tokens, the accumulators as in QuadTile (row pairs interleaved), so a
// block's unpacked row pair serves T tokens and its 64-bit product pair
// comes from a table computed a block ahead (4Q products per multiply).
// The 8-lane sums: QuadSums with rows 4j..4j + 3 in 128-bit lane j.
// A quad table's scale of one token (p[0], four times) in lanes 0..7 and
// of the next (p[4]) in lanes 8..15.
BRAID_AVX512 inline __m512 TwoTokens(const float* p) {
  return _mm512_insertf32x8(_mm512_set1_ps(p[0]), _mm256_set1_ps(p[4]), 1);
}

// The (d, m) of a row-quad tile's 4Q rows at block b (quads quad_stride
// bytes apart) in row order, in lanes 0..4Q - 1 of dw and mw: of quads g's
// [d0 m0 d1 m1 d2 m2 d3 m3] at lanes 8g..8g + 7 of two registers (g = 0, 1 |
// 2, 3), every d (even) and m (odd).
template <typename F, int Q>
BRAID_AVX512 inline __attribute__((always_inline)) void RowQuadScales(
    const uint8_t* b, int64_t quad_stride, __m512i even, __m512i odd,
    __m512* dw, __m512* mw) {
  if constexpr (Q == 4) {
    const __m512 lo = _mm512_insertf32x8(
        F::QuadScales(b),
        _mm512_castps512_ps256(F::QuadScales(b + quad_stride)), 1);
    const __m512 hi = _mm512_insertf32x8(
        F::QuadScales(b + 2 * quad_stride),
        _mm512_castps512_ps256(F::QuadScales(b + 3 * quad_stride)), 1);
    *dw = _mm512_permutex2var_ps(lo, even, hi);
    *mw = _mm512_permutex2var_ps(lo, odd, hi);
  } else {
    // Q == 2: both quads' 8 (d, m) in one register (lanes 8..15 of dw and
    // mw repeat 0..7, unused).
    const __m512 dm =
        Q == 1 ? F::QuadScales(b)
               : _mm512_insertf32x8(
                     F::QuadScales(b),
                     _mm512_castps512_ps256(F::QuadScales(b + quad_stride)), 1);
    *dw = _mm512_permutexvar_ps(even, dm);
    *mw = _mm512_permutexvar_ps(odd, dm);
  }
}

// Block i's products d_w(r) * d_x(t) of a row-quad tile into `slot` (its
// ring slot: slot[t][r], or with kPairs slot[t / 2][8 * (t % 2) + r]) and
// Q4_1's min terms m_w(r) * s_x(t) into summs, from the rows' dw / mw
// (RowQuadScales) and the quad tables' scales of quad 0 of tokens.
template <typename F, int T, bool kPairs>
BRAID_AVX512 inline __attribute__((always_inline)) void RowQuadProducts(
    __m512 dw, __m512 mw, const float* dpat, const float* spat, int64_t i,
    float (*slot)[16], __m512 (&summs)[T]) {
  if constexpr (kPairs) {
#pragma GCC unroll 2
    for (int j = 0; j < T / 2; ++j) {
      // Tokens 2j and 2j + 1's scales at block i.
      const int64_t at = (i * 4 + 2 * j) * 4;
      _mm512_store_ps(slot[j], _mm512_mul_ps(dw, TwoTokens(dpat + at)));
      if constexpr (F::kMin) {
        summs[j] = _mm512_fmadd_ps(mw, TwoTokens(spat + at), summs[j]);
      }
    }
  } else {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // The tables' scales of token t at block i.
      const int64_t at = (i * 4 + t) * 4;
      _mm512_store_ps(slot[t], _mm512_mul_ps(dw, _mm512_set1_ps(dpat[at])));
      if constexpr (F::kMin) {
        summs[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(spat[at]), summs[t]);
      }
    }
  }
}

// A row-quad tile's elements: token t < n_valid's 4Q rows, QuadSums of its
// row pairs plus Q4_1's min terms (summs: lanes are rows; with kPairs two
// tokens a register, token t's rows in lanes 8 * (t % 2)..), stored into
// (or added to) y's 4Q rows of the token at once.
template <typename F, int T, int Q, bool kPairs>
BRAID_AVX512 inline __attribute__((always_inline)) void StoreRowQuadTile(
    __m512 (&acc)[2 * Q][T], __m512 (&summs)[T], int n_valid, float* y,
    int64_t ld_y, bool accumulate) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    if (t >= n_valid) break;
    // Pairs 2j and 2j + 1 are rows 4j..4j + 3.
    __m512 a0[4], a1[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      a0[j] = j < Q ? acc[2 * j][t] : _mm512_setzero_ps();
      a1[j] = j < Q ? acc[2 * j + 1][t] : _mm512_setzero_ps();
    }
    __m512 v = QuadSums(a0, a1);
    if constexpr (F::kMin) {
      if constexpr (kPairs) {
        const __m512 s2 = summs[t / 2];  // token t's rows to lanes 0..7
        v = _mm512_add_ps(v, t % 2 ? _mm512_shuffle_f32x4(s2, s2, 0xEE) : s2);
      } else {
        v = _mm512_add_ps(v, summs[t]);
      }
    }
    constexpr __mmask16 kRows = Q == 4 ? 0xFFFF : Q == 2 ? 0x00FF : 0x000F;
    float* dst = y + t * ld_y;
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(kRows, dst), v);
    _mm512_mask_storeu_ps(dst, kRows, v);
  }
}

template <typename F, int T, int Q>
BRAID_AVX512 void RowQuadTile(const uint8_t* w, const uint8_t* xq,
                              const float* dpat, const float* spat, int64_t nb,
                              int n_valid, float* y, int64_t ld_y,
                              bool accumulate, const SpreadPrefetch& pf) {
  static_assert((T == 1 || T == 2 || T == 4) && (Q == 1 || Q == 2 || Q == 4) &&
                    2 * Q * T <= 16,
                "tile shape");
  constexpr int P = 2 * Q;                            // row pairs
  constexpr int64_t kQB = 4 * sizeof(typename F::W);  // a quad's block
  // 8 rows: two tokens' products (and min terms) per multiply (fma), rows
  // 0..7 of token 2j in lanes 0..7 and of token 2j + 1 in lanes 8..15.
  constexpr bool kPairs = Q == 2 && T % 2 == 0;
  // prod[RingSlot(i)][t][r] = d_w(r) * d_x(t) at block i (r < 4Q); with
  // kPairs prod[RingSlot(i)][t / 2][8 * (t % 2) + r].
  alignas(64) float prod[kScaleRing][T][16];
  __m512 acc[P][T];
  __m512 summs[T];  // lanes: rows
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) summs[t] = _mm512_setzero_ps();
  // Every d (m) in row order (RowQuadScales).
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12,
                                        10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const int64_t quad_stride = nb * kQB;  // bytes from quad to quad
  // Block i's products into prod[RingSlot(i)], its min terms into summs.
  auto scales = [&](int64_t i) BRAID_AVX512 {
    __m512 dw, mw;
    RowQuadScales<F, Q>(w + i * kQB, quad_stride, even, odd, &dw, &mw);
    RowQuadProducts<F, T, kPairs>(dw, mw, dpat, spat, i, prod[RingSlot(i)],
                                  summs);
  };
  for (int64_t i = 0; i < std::min(kScalesAhead, nb); ++i) scales(i);
  for (int64_t i = 0; i < nb; ++i) {
    if (i + kScalesAhead < nb) scales(i + kScalesAhead);
    pf.Block<(4 * Q * sizeof(typename F::W) + 63) / 64>(i);
    __m512i xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xv[t] = _mm512_load_si512(xq + (i * 4 + t) * 64);
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m512i q = F::QuadPair(w + (p / 2) * quad_stride + i * kQB, p % 2);
      __m512i start = _mm512_setzero_si512();
      if constexpr (F::kSigned) {
        start = _mm512_sub_epi32(
            start, _mm512_dpbusd_epi32(
                       start, _mm512_set1_epi8(static_cast<char>(0x80)), q));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        double pr;
        std::memcpy(&pr,
                    kPairs ? &prod[RingSlot(i)][t / 2][8 * (t % 2) + 2 * p]
                           : &prod[RingSlot(i)][t][2 * p],
                    8);
        acc[p][t] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr)),
                                    _mm512_cvtepi32_ps(F::Dot(start, q, xv[t])),
                                    acc[p][t]);
      }
    }
  }
  StoreRowQuadTile<F, T, Q, kPairs>(acc, summs, n_valid, y, ld_y, accumulate);
}

}  // namespace

BRAID_AVX512 void QuadTileRows(DType type, const uint8_t* w, size_t w_row_bytes,
                               const uint8_t* xq, const float* dpat,
                               const float* spat, int64_t nb, int64_t r,
                               int64_t nc, float* y, int64_t ld_y,
                               bool accumulate, const uint8_t* near,
                               int64_t near_bytes, const uint8_t* far,
                               int64_t far_bytes) {
  if (type == DType::kQ4_1) {
    RunQuadRows<Q41>(w, w_row_bytes, xq, dpat, spat, nb, r, nc, y, ld_y,
                     accumulate, near, near_bytes, far, far_bytes);
  } else if (type == DType::kQ4_0) {
    RunQuadRows<Q40>(w, w_row_bytes, xq, dpat, spat, nb, r, nc, y, ld_y,
                     accumulate, near, near_bytes, far, far_bytes);
  } else {
    RunQuadRows<Q80>(w, w_row_bytes, xq, dpat, spat, nb, r, nc, y, ld_y,
                     accumulate, near, near_bytes, far, far_bytes);
  }
}

BRAID_AVX512 void RowQuadTiles(DType type, const uint8_t* w, int quads,
                               const uint8_t* xq, const float* dpat,
                               const float* spat, int64_t nb, int n_tok,
                               float* y, int64_t ld_y, bool accumulate,
                               const uint8_t* near, int64_t near_bytes,
                               const uint8_t* far, int64_t far_bytes) {
  const SpreadPrefetch pf(near, near_bytes, far, far_bytes);
  auto tile = [&](auto t) {
    t(w, xq, dpat, spat, nb, n_tok, y, ld_y, accumulate, pf);
  };
  auto shapes = [&](auto f) {
    using F = decltype(f);
    const bool two = n_tok == 2;
    if (quads == 2) {
      tile(RowQuadTile<F, 4, 2>);
    } else if (quads == 4) {
      two ? tile(RowQuadTile<F, 2, 4>) : tile(RowQuadTile<F, 1, 4>);
    } else {
      two ? tile(RowQuadTile<F, 2, 1>) : tile(RowQuadTile<F, 1, 1>);
    }
  };
  if (type == DType::kQ4_1) {
    shapes(Q41{});
  } else if (type == DType::kQ4_0) {
    shapes(Q40{});
  } else {
    shapes(Q80{});
  }
}

BRAID_AVX512 void LayOutQuadTables(DType type, const uint8_t* x,
                                   size_t x_row_bytes, int64_t nc, int64_t nb,
                                   int64_t t0, int64_t t1, int64_t b0,
                                   int64_t b1, uint8_t* xq, float* dpat,
                                   float* spat) {
  if (type == DType::kQ4_1) {
    LayOutQuads<Q41>(x, x_row_bytes, nc, nb, t0, t1, b0, b1, xq, dpat, spat);
  } else {
    LayOutQuads<Q80>(x, x_row_bytes, nc, nb, t0, t1, b0, b1, xq, dpat, spat);
  }
}

}  // namespace braid::kernels::cpu::internal
