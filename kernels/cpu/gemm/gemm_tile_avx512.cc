// AVX-512 tiles for GemmTile (Q4_1, Q4_0, Q8_0 and Q5_1 weights; AVX-512
// F/BW/VL/DQ and VNNI; Q5_0 goes through the octets, gemm_octets.h). Each
// 512-bit accumulator holds the 8-lane accumulators of two output elements,
// rows r and r + 1 of one token: lanes are independent, so every element still
// gets, per block and in block order, its exact integer block sum (dpbusd),
// converted to float, times the float product d_w * d_x, fused into its own 8
// lanes; then HorizontalSum8 of its half (and, for Q4_1, + its min-term sum,
// fma(m_w, s_x, summs) in block order). That is dot_avx2.cc's operation
// sequence, so results are bit-identical to DotRow; only the number of
// instructions per element changes (about half of the 256-bit tile's).
//
// Signed weights (Q8_0, Q4_0): see gemm_avx512_blocks.h. The quad layout's
// tiles are in gemm_quads_avx512.cc.
//
// The activation scales are converted to f32 once per call (or chunk of
// tokens): a table [block][token], so the inner loop multiplies by a
// broadcast from memory. Run here also drives the quad layout's tiles.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm/gemm_avx512_blocks.h"
#include "kernels/cpu/gemm/gemm_quads_avx512.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"

namespace braid::kernels::cpu::internal {
namespace {

// Block scales of 4 rows (row group g of a tile, its first row's block at
// b): the rows' d_w as the two row pairs' lanes (wd[0]: rows 0 and 1 in
// lanes 0..7 and 8..15, wd[1]: rows 2 and 3), and for Q4_1 their min terms
// m_w * s_x(t) fused into summs[t] (xs: the block's token scales).
template <typename F, int T>
BRAID_AVX512 inline __attribute__((always_inline)) void GroupScales(
    const uint8_t* b, size_t w_row_bytes, __m512i pick01, __m512i pick23,
    const float* xs, __m512* wd, __m128* summs) {
  // (d, m) of 4 rows as f16 pairs (Q8_0: d and the first two quants,
  // which are ignored) -> f32 [d0 m0 d1 m1 d2 m2 d3 m3].
  const __m128i dm16 =
      _mm_set_epi32(static_cast<int>(Load32Bits(b + 3 * w_row_bytes)),
                    static_cast<int>(Load32Bits(b + 2 * w_row_bytes)),
                    static_cast<int>(Load32Bits(b + w_row_bytes)),
                    static_cast<int>(Load32Bits(b)));
  const __m256 dm8 = _mm256_cvtph_ps(dm16);
  const __m512 dm = _mm512_castps256_ps512(dm8);
  wd[0] = _mm512_permutexvar_ps(pick01, dm);
  wd[1] = _mm512_permutexvar_ps(pick23, dm);
  if constexpr (F::kMin) {
    const __m128 m =
        _mm_shuffle_ps(_mm256_castps256_ps128(dm8),
                       _mm256_extractf128_ps(dm8, 1), _MM_SHUFFLE(3, 1, 3, 1));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      summs[t] = _mm_fmadd_ps(m, _mm_set1_ps(xs[t]), summs[t]);
    }
  }
}

// The tile's elements: each row pair's two 8-lane halves summed
// (HorizontalSum8), plus Q4_1's min terms, stored into (or added to) y.
template <typename F, int P, int T>
BRAID_AVX512 inline __attribute__((always_inline)) void StoreTile(
    __m512 (&acc)[P][T], __m128 (&summs)[P / 2][T], float* y, int64_t ld_y,
    bool accumulate) {
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
      const uint8_t* b = wb + 4 * g * w_row_bytes;
      GroupScales<F, T>(b, w_row_bytes, pick01, pick23,
                        F::kMin ? xs + i * ld_s : nullptr, wd + 2 * g,
                        summs[g]);
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
  StoreTile<F, P, T>(acc, summs, y, ld_y, accumulate);
}

// How far ahead (in rows) weights are prefetched into L2: 32 rows, 2
// row-quad tiles (1-2 tokens; 128 rows: one-stream decode 392 -> 416-420
// tok/s at 32, 16 or 48 rows; with the spread prefetch 64 rows 4% slower a
// step) or 4-8 row tiles (GGUF rows).
constexpr int64_t kFarRows = 32;
// The quad tiles' (3+ tokens): 16 rows, 4 tiles (step-interleaved against
// 16: 32 rows 0.7-0.9% slower a step at 4 and 8 sequences, 64 and 8 rows
// 2-4%).
constexpr int64_t kQuadFarRows = 16;

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

// Design: the task's rows are walked in tiles of R rows. The quad layout
// (the model's weights): quad tiles of 4 rows for 3+ tokens (8 tokens a
// tile, so a weight block is unpacked once for 8), row-quad tiles of 16
// rows for 1 or 2 (more independent weight streams). GGUF rows: row tiles
// of 8 rows for decode-sized batches, 4 otherwise; rows left over (fewer
// than 4) go to the AVX2 tiles, which give the same bits. Tokens go in
// chunks of at most 64 whose tables stay small; the rows of a task (a few
// KB to a few hundred KB) are reread from cache for each chunk.
// Tokens per chunk whose scale tables fit kScaleFloats (see Run).
int64_t ChunkTokens(int64_t nb) {
  int64_t chunk =
      std::min<int64_t>(64, kScaleFloats / std::max<int64_t>(nb, 1));
  return std::max<int64_t>(chunk / 8 * 8, 1);
}

// Where each activation table of a chunk of nc tokens lies in one 64-byte
// aligned buffer (byte offsets, each a multiple of 64): for GGUF rows (the
// row tiles) f32 scales [block][token] (xd; Q4_1's sums in xs), for the quad
// layout its quad tables (xq, dpat, spat; see gemm_quads_avx512.cc).
struct TableLayout {
  size_t xd = 0, xs = 0, xq = 0, dpat = 0, spat = 0, bytes = 0;
};
TableLayout LayOutTables(int64_t nb, int64_t nc, bool quad_layout) {
  auto round64 = [](size_t b) { return (b + 63) / 64 * 64; };
  TableLayout t;
  if (quad_layout) {
    const size_t tokens = static_cast<size_t>((nc + 3) / 4 * 4);
    const size_t q = tokens * nb * 64, pat = tokens * nb * 4 * sizeof(float);
    t.dpat = q;
    t.spat = q + pat;
    t.bytes = q + 2 * pat;
  } else {
    const size_t scales = round64(static_cast<size_t>(nb * nc) * sizeof(float));
    t.xs = scales;
    t.bytes = 2 * scales;
  }
  return t;
}

// Fills blocks [b0, b1) of tokens [t0, t1) of the tables of a chunk of nc
// tokens (row stride x_row_bytes; xc is token 0) into buf (laid out as
// LayOutTables says).
template <typename F>
BRAID_AVX512 GemmTileActivations PrepareChunk(const uint8_t* xc,
                                              size_t x_row_bytes, int64_t nc,
                                              int64_t nb, bool quad_layout,
                                              uint8_t* buf, int64_t t0,
                                              int64_t t1, int64_t b0 = 0,
                                              int64_t b1 = -1) {
  if (b1 < 0) b1 = nb;
  constexpr int64_t kXB = sizeof(typename F::X);
  const TableLayout l = LayOutTables(nb, nc, quad_layout);
  GemmTileActivations out;
  out.n_tok = nc;
  if (quad_layout) {
    out.xq = buf + l.xq;
    out.dpat = reinterpret_cast<float*>(buf + l.dpat);
    out.spat = reinterpret_cast<float*>(buf + l.spat);
    LayOutQuadTables(F::kType, xc, x_row_bytes, nc, nb, t0, t1, b0, b1,
                     buf + l.xq, reinterpret_cast<float*>(buf + l.dpat),
                     reinterpret_cast<float*>(buf + l.spat));
    return out;
  }
  float* xd = reinterpret_cast<float*>(buf + l.xd);
  float* xs = reinterpret_cast<float*>(buf + l.xs);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* xt = xc + t * x_row_bytes;
    for (int64_t i = b0; i < b1; ++i) {
      uint16_t h[2];
      std::memcpy(h, xt + i * kXB, 4);
      xd[i * nc + t] = _cvtsh_ss(h[0]);
      if constexpr (F::kMin) xs[i * nc + t] = _cvtsh_ss(h[1]);
    }
  }
  out.xd = xd;
  out.xs = xs;
  return out;
}

uint8_t* Align64(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) &
                                    ~uintptr_t{63});
}

// Where a tile of R rows from row r prefetches: the next tile's rows into
// L1 (near) and rows further ahead into L2 (far), so their DRAM latency
// overlaps several tiles' arithmetic; on the first chunk of tokens only
// (the rows stream from memory once), up to row max(r1, prefetch_end) (past
// r1: the rows the caller takes next). Spread over the tile's blocks by the
// quad-layout tiles (SpreadPrefetch); the others' are issued at once
// (Issue).
struct TilePrefetch {
  const uint8_t* near = nullptr;
  const uint8_t* far = nullptr;
  int64_t near_bytes = 0, far_bytes = 0;

  TilePrefetch(const uint8_t* w, size_t w_row_bytes, int64_t r, int R,
               int64_t far_rows, bool first_chunk, int64_t r1,
               int64_t prefetch_end)
      : near(w + (r + R) * w_row_bytes), far(w + (r + far_rows) * w_row_bytes) {
    if (!first_chunk) return;
    const uint8_t* end = w + std::max(r1, prefetch_end) * w_row_bytes;
    const int64_t tile_bytes = R * static_cast<int64_t>(w_row_bytes);
    near_bytes = std::min(tile_bytes, end - std::min(near, end));
    far_bytes = std::min(tile_bytes, end - std::min(far, end));
  }
  void Issue() const {
    for (int64_t off = 0; off < near_bytes; off += 64) PrefetchL1(near + off);
    for (int64_t off = 0; off < far_bytes; off += 64) PrefetchL2(far + off);
  }
};

// Rows [r_end, r1) of a chunk that the R-row tiles left: quads on the quad
// layout, else the AVX2 tiles.
BRAID_AVX512 void RunLeftoverRows(DType type, const uint8_t* w,
                                  size_t w_row_bytes, const uint8_t* xc,
                                  size_t x_row_bytes, int64_t n, int64_t nb,
                                  int64_t r_end, int64_t r1, int64_t nc,
                                  const GemmTileActivations& tab, float* yc,
                                  int64_t ld_y, bool accumulate,
                                  bool quad_layout) {
  if (quad_layout) {  // Quads left over from the 8- and 16-row tiles.
    for (int64_t r = r_end; r < r1; r += 4) {
      if (nc >= 3) {
        QuadTileRows(type, w, w_row_bytes, tab.xq, tab.dpat, tab.spat, nb, r,
                     nc, yc, ld_y, accumulate, nullptr, 0, nullptr, 0);
      } else {
        RowQuadTiles(type, w + r * w_row_bytes, 1, tab.xq, tab.dpat, tab.spat,
                     nb, static_cast<int>(nc), yc + r, ld_y, accumulate,
                     nullptr, 0, nullptr, 0);
      }
    }
  } else if (r_end < r1) {
    GemmTileAvx2(type, w, w_row_bytes, xc, x_row_bytes, n, r_end, r1, nc, yc,
                 ld_y, accumulate);
  }
}

template <typename F>
BRAID_AVX512 void Run(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
                      int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
                      DType type, const GemmTileActivations* prepared,
                      bool quad_layout, int64_t prefetch_end) {
  const int64_t nb = n / kQK;
  const int64_t chunk = ChunkTokens(nb);
  if (nb * chunk > kScaleFloats) {  // Rows too long for the tables.
    // (CanRepackQuads rules this out for the quad layout.)
    GemmTileAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                 ld_y, accumulate, prefetch_end);
    return;
  }
  // The quad layout: row-quad tiles of 16 rows for 1 or 2 tokens and of 8
  // rows for 3 or 4, quad tiles (4 rows) for 5+ and for the quads left
  // over, all on the quad tables. GGUF rows: the row tiles, 8 rows for
  // decode-sized batches, else 4.
  // Tables laid out once for the whole call (one chunk of tokens), or
  // here, per chunk.
  const bool use_prepared = prepared != nullptr && prepared->n_tok == n_tok &&
                            n_tok <= chunk &&
                            quad_layout == (prepared->xq != nullptr);
  thread_local std::vector<uint8_t> table_buf;
  uint8_t* buf = nullptr;
  if (!use_prepared) {
    const size_t need = LayOutTables(nb, chunk, quad_layout).bytes + 64;
    if (table_buf.size() < need) table_buf.resize(need);
    buf = Align64(table_buf.data());
  }
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int64_t nc = std::min(chunk, n_tok - t0);
    const uint8_t* xc = x + t0 * x_row_bytes;
    const GemmTileActivations tab =
        use_prepared
            ? *prepared
            : PrepareChunk<F>(xc, x_row_bytes, nc, nb, quad_layout, buf, 0, nc);
    float* yc = y + t0 * ld_y;
    // Rows a tile, per chunk (the last chunk of a long batch may hold 1 to
    // 4 tokens). 8 rows x 3-4 tokens: against 4-row quad tiles, in cache
    // 8-13% less time per element, in the model (step-interleaved, 4
    // sequences, one core complex) 2-3.8% less a step.
    const bool rows8 = quad_layout && nc >= 3 && nc <= 4;
    // 5-6, 9-10, ... tokens: the quad tiles take all but the last 1-2
    // (`rest`), which a 16-row tile takes after them, its rows still in
    // cache: a quad tile costs about the same for its 8 tokens whatever
    // holds them (one thread, 1536 rows of 576: 5 tokens 84 -> 67 us, 6
    // tokens 84 -> 75).
    const int rest = quad_layout && nc >= 5 && nc % 4 <= 2 ? nc % 4 : 0;
    int R = n_tok < 4 ? 8 : 4;  // GGUF rows
    if (quad_layout) R = rest > 0 ? 16 : rows8 ? 8 : nc >= 3 ? 4 : 16;
    const int64_t r_end = r0 + (r1 - r0) / R * R;
    for (int64_t r = r0; rest > 0 && r < r_end; r += R) {
      const int64_t head = nc - rest, qd = head / 4;
      // 4 tokens: the 8-row tiles (rows8's), else 4-row quad tiles.
      const int step = head == 4 ? 8 : 4;
      for (int64_t q = r; q < r + R; q += step) {
        const TilePrefetch pf(w, w_row_bytes, q, step, kQuadFarRows, t0 == 0,
                              r1, prefetch_end);
        if (head == 4) {
          RowQuadTiles(type, w + q * w_row_bytes, 2, tab.xq, tab.dpat, tab.spat,
                       nb, 4, yc + q, ld_y, accumulate, pf.near, pf.near_bytes,
                       pf.far, pf.far_bytes);
        } else {
          QuadTileRows(type, w, w_row_bytes, tab.xq, tab.dpat, tab.spat, nb, q,
                       head, yc, ld_y, accumulate, pf.near, pf.near_bytes,
                       pf.far, pf.far_bytes);
        }
      }
      RowQuadTiles(type, w + r * w_row_bytes, 4, tab.xq + qd * nb * 4 * 64,
                   tab.dpat + qd * nb * 16, tab.spat + qd * nb * 16, nb, rest,
                   yc + head * ld_y + r, ld_y, accumulate, nullptr, 0, nullptr,
                   0);
    }
    for (int64_t r = r0; rest == 0 && r < r_end; r += R) {
      const TilePrefetch pf(w, w_row_bytes, r, R,
                            quad_layout && nc >= 3 ? kQuadFarRows : kFarRows,
                            t0 == 0, r1, prefetch_end);
      if (!quad_layout) pf.Issue();
      if (rows8) {
        RowQuadTiles(type, w + r * w_row_bytes, 2, tab.xq, tab.dpat, tab.spat,
                     nb, static_cast<int>(nc), yc + r, ld_y, accumulate,
                     pf.near, pf.near_bytes, pf.far, pf.far_bytes);
      } else if (quad_layout && nc <= 2) {
        RowQuadTiles(type, w + r * w_row_bytes, 4, tab.xq, tab.dpat, tab.spat,
                     nb, static_cast<int>(nc), yc + r, ld_y, accumulate,
                     pf.near, pf.near_bytes, pf.far, pf.far_bytes);
      } else if (quad_layout) {
        QuadTileRows(type, w, w_row_bytes, tab.xq, tab.dpat, tab.spat, nb, r,
                     nc, yc, ld_y, accumulate, pf.near, pf.near_bytes, pf.far,
                     pf.far_bytes);
      } else if (R == 8) {
        RunRows<F, 8>(w, w_row_bytes, xc, x_row_bytes, tab.xd, tab.xs, nc, nb,
                      r, nc, yc, ld_y, accumulate);
      } else {
        RunRows<F, 4>(w, w_row_bytes, xc, x_row_bytes, tab.xd, tab.xs, nc, nb,
                      r, nc, yc, ld_y, accumulate);
      }
    }
    RunLeftoverRows(type, w, w_row_bytes, xc, x_row_bytes, n, nb, r_end, r1, nc,
                    tab, yc, ld_y, accumulate, quad_layout);
  }
}

}  // namespace

bool GemmTileAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate, const GemmTileActivations* prepared,
                    bool quad_layout, int64_t prefetch_end) {
  switch (type) {
    case DType::kQ4_1:
      Run<Q41>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, quad_layout, prefetch_end);
      return true;
    case DType::kQ8_0:
      Run<Q80>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, quad_layout, prefetch_end);
      return true;
    case DType::kQ4_0:
      Run<Q40>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, quad_layout, prefetch_end);
      return true;
    case DType::kQ5_1:  // GGUF rows only (no quad layout)
      Run<Q51>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, false, prefetch_end);
      return true;
    default:
      return false;
  }
}

namespace {

// Whether the AVX-512 tiles take prepared tables for this call.
bool TakesPrepared(DType type, int64_t n, int64_t n_tok) {
  if (type != DType::kQ4_1 && type != DType::kQ8_0 && type != DType::kQ4_0 &&
      type != DType::kQ5_1) {
    return false;
  }
  const int64_t nb = n / kQK;
  return n_tok >= 1 && n_tok <= ChunkTokens(nb) &&
         nb * ChunkTokens(nb) <= kScaleFloats;
}

}  // namespace

size_t GemmTileActivationsBytesAvx512(DType type, int64_t n, int64_t n_tok) {
  if (!TakesPrepared(type, n, n_tok)) return 0;
  // Either layout's (the quad tables are the larger), + alignment.
  const int64_t nb = n / kQK;
  return std::max(LayOutTables(nb, n_tok, true).bytes,
                  LayOutTables(nb, n_tok, false).bytes) +
         64;
}

BRAID_AVX512 bool PrepareGemmTileActivationsAvx512(
    DType type, const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t n_tok,
    uint8_t* buf, GemmTileActivations* out, int64_t t0, int64_t t1,
    bool quad_layout, int64_t b0, int64_t b1) {
  if (!TakesPrepared(type, n, n_tok)) return false;
  uint8_t* p = Align64(buf);
  const int64_t nb = n / kQK;
  // The tables depend only on the activations' type (Q8_1's sums beside
  // Q8_0's d); Q5_1 has no quad layout.
  const bool q8_1 = type == DType::kQ4_1 || type == DType::kQ5_1;
  if (quad_layout && type == DType::kQ5_1) return false;
  *out = q8_1 ? PrepareChunk<Q41>(x, x_row_bytes, n_tok, nb, quad_layout, p, t0,
                                  t1, b0, b1)
              : PrepareChunk<Q80>(x, x_row_bytes, n_tok, nb, quad_layout, p, t0,
                                  t1, b0, b1);
  return true;
}

}  // namespace braid::kernels::cpu::internal
