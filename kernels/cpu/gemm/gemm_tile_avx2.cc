// AVX2 tiles for GemmTile (Q5_0 has only the octet tiles, gemm_octets.h,
// and DotRow). Per output element the operations are those of
// dot_avx2.cc: per block, an integer block sum (maddubs + madd, or VNNI's
// dpbusd where the CPU has it: the same exact integers), converted to float
// and fused-multiply-added into one 8-lane accumulator in block order, then
// HorizontalSum8; Q4_1 adds its min-term sum, accumulated in block order.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/avx2_blocks.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/gemm/scale_ring.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BRAID_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline __m256i Load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Integer sums of u8 x s8 products over groups of 4 bytes, as 8 floats.
template <bool kVnni>
BRAID_VNNI inline __m256 MulSumU8I8(__m256i ax, __m256i sy) {
  if constexpr (kVnni) {
    return _mm256_cvtepi32_ps(
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, sy));
  } else {
    const __m256i dot16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
  }
}

// Weight block formats. Prepare() loads what a weight block contributes;
// Sum() gives the float block sum for one activation block.
//
// Formats with signed values against Q8_0 (Q8_0, IQ4_NL): |q| and q, so
// maddubs takes |q| and the activations with q's signs.
template <typename WBlock, typename Values>
struct SignedFormat {
  using W = WBlock;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = 0;
  struct Prep {
    __m256i abs_w, w;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) {
    const __m256i q = Values::Of(b);
    return {_mm256_sign_epi8(q, q), q};
  }
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x) {
    return MulSumU8I8<kVnni>(p.abs_w, _mm256_sign_epi8(Load32(x.qs), p.w));
  }
};

// Each format's values of a block (Of), as a type for the templates.
struct Q80Values {
  BRAID_AVX2 static __m256i Of(const BlockQ8_0& b) { return Load32(b.qs); }
};
struct IQ4NLValues {
  BRAID_AVX2 static __m256i Of(const BlockIQ4_NL& b) {
    return _mm256_shuffle_epi8(Iq4NlTable(kIq4NlValues), UnpackNibbles(b.qs));
  }
};
using Q80 = SignedFormat<BlockQ8_0, Q80Values>;
using IQ4NL = SignedFormat<BlockIQ4_NL, IQ4NLValues>;

// Formats whose values are unsigned quants less an offset (Q4_0: q - 8)
// against Q8_0: maddubs takes the quants as they are, and
// each 4-quant group's sum then takes off offset x the group's activation
// sum, from a table laid out once per call (CorrectionTables): the same
// exact integers as the signed form's, one operation fewer per element and
// none to prepare the block's signs.
template <typename WBlock, typename Values, int kOff>
struct OffsetFormat {
  using W = WBlock;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffset = kOff;
  struct Prep {
    __m256i q;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) { return {Values::Of(b)}; }
  // neg_corr: -offset x the activations' 4-byte group sums, as 8 lanes.
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x, __m256i neg_corr) {
    if constexpr (kVnni) {
      return _mm256_cvtepi32_ps(
          _mm256_dpbusd_avx_epi32(neg_corr, p.q, Load32(x.qs)));
    } else {
      const __m256i dot16 = _mm256_maddubs_epi16(p.q, Load32(x.qs));
      return _mm256_cvtepi32_ps(_mm256_add_epi32(
          _mm256_madd_epi16(dot16, _mm256_set1_epi16(1)), neg_corr));
    }
  }
};
// The unsigned quants of a 4-bit (Q4_0, Q4_1) or 5-bit (Q5_1) block.
struct NibbleQuants {
  template <typename B>
  BRAID_AVX2 static __m256i Of(const B& b) {
    return UnpackNibbles(b.qs);
  }
};
struct FiveBitQuants {
  template <typename B>
  BRAID_AVX2 static __m256i Of(const B& b) {
    return _mm256_or_si256(UnpackNibbles(b.qs), FifthBits(b.qh));
  }
};
using Q40 = OffsetFormat<BlockQ4_0, NibbleQuants, 8>;

// Formats with unsigned values and a min against Q8_1 (Q4_1, Q5_1; d and m
// lead the block).
template <typename WBlock, typename Values>
struct MinFormat {
  using W = WBlock;
  using X = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr int kOffset = 0;
  struct Prep {
    __m256i w;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) { return {Values::Of(b)}; }
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x) {
    return MulSumU8I8<kVnni>(p.w, Load32(x.qs));
  }
};
using Q41 = MinFormat<BlockQ4_1, NibbleQuants>;
using Q51 = MinFormat<BlockQ5_1, FiveBitQuants>;

// The 4 bytes at p (a block's f16 d and m; for Q4_0 / Q8_0 d and two quants,
// which are ignored).
inline int32_t Load32Bits(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// T floats at p (a token scale table's row) repeated over 8 lanes: lane k
// holds p[k % T].
template <int T>
BRAID_AVX2 inline __m256 TokenLanes(const float* p) {
  if constexpr (T == 1) {
    return _mm256_broadcast_ss(p);
  } else if constexpr (T == 2) {
    return _mm256_castpd_ps(
        _mm256_broadcast_sd(reinterpret_cast<const double*>(p)));
  } else if constexpr (T == 4) {
    return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  } else {
    return _mm256_loadu_ps(p);
  }
}

// Which of a block's scales lane k = r * T + t of an R x T tile takes: row
// r's d (m when `m`) of [d0 m0 d1 m1 ...] (rows 0..3) or, for 8 rows, of the
// rows' d (m) in order (RowScales).
template <int R, int T>
BRAID_AVX2 inline __attribute__((always_inline)) __m256i PickLanes(bool m) {
  alignas(32) int32_t pick[8];
  for (int k = 0; k < 8; ++k) {
    const int r = R == 8 ? k : k / T;
    pick[k] = (R == 8 ? k : 2 * (r % 4)) + (m && R != 8 ? 1 : 0);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(pick));
}

// The (d, m) of R rows' blocks at wb (rows w_row_bytes apart) as f32 lanes
// k, picked by id / im (PickLanes).
template <int R>
BRAID_AVX2 inline __attribute__((always_inline)) void RowScales(
    const uint8_t* wb, size_t w_row_bytes, __m256i id, __m256i im, __m256* dw,
    __m256* mw) {
  if constexpr (R == 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_set_epi32(
        Load32Bits(wb + 3 * w_row_bytes), Load32Bits(wb + 2 * w_row_bytes),
        Load32Bits(wb + w_row_bytes), Load32Bits(wb)));
    const __m256 b = _mm256_cvtph_ps(_mm_set_epi32(
        Load32Bits(wb + 7 * w_row_bytes), Load32Bits(wb + 6 * w_row_bytes),
        Load32Bits(wb + 5 * w_row_bytes), Load32Bits(wb + 4 * w_row_bytes)));
    // [d0 d1 d4 d5 | d2 d3 d6 d7] -> rows in order.
    *dw = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
        _MM_SHUFFLE(3, 1, 2, 0)));
    *mw = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0)));
  } else {
    int32_t dm[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) dm[r] = Load32Bits(wb + r * w_row_bytes);
    const __m256 a = _mm256_cvtph_ps(_mm_set_epi32(dm[3], dm[2], dm[1], dm[0]));
    *dw = _mm256_permutevar8x32_ps(a, id);
    *mw = _mm256_permutevar8x32_ps(a, im);
  }
}

// Element (r, t) of an R x T tile: acc[r][t]'s lanes summed (HorizontalSum8)
// plus lane r * T + t of its min terms (Q4_1), stored into (or added to)
// y[t * ld_y + r].
template <typename F, int R, int T>
BRAID_AVX2 inline __attribute__((always_inline)) void StoreTile(
    __m256 (&acc)[R][T], __m256 summs, float* y, int64_t ld_y,
    bool accumulate) {
  alignas(32) float mins[8];
  _mm256_store_ps(mins, summs);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float v = HorizontalSum8(acc[r][t]);
      if constexpr (F::kMin) v = v + mins[r * T + t];
      float& out = y[t * ld_y + r];
      out = accumulate ? out + v : v;
    }
  }
}

// R rows x T tokens (R * T <= 8, T = 1, 2, 4 or 8); element (r, t) follows
// the row dot's order exactly. Its scales are lane k = r * T + t of 8: the
// products d_w(r) * d_x(t) of a block come from one multiply (into a table
// each step broadcasts from) and Q4_1's min terms m_w(r) * s_x(t) from one
// fma, in block order. xd, xs: the activations' scales as f32, [block][token]
// with ld_s tokens a block (xs only for Q4_1); xc: OffsetFormat's
// corrections, 8 lanes a token, ld_c ints a block (CorrectionTables).
template <typename F, int R, int T, bool kVnni>
BRAID_VNNI void Tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                     size_t x_row_bytes, const float* xd, const float* xs,
                     int64_t ld_s, const int32_t* xc, int64_t ld_c, int64_t nb,
                     float* y, int64_t ld_y, bool accumulate) {
  static_assert(R * T <= 8 && (T == 1 || T == 2 || T == 4 || T == 8),
                "tile shape");
  constexpr int64_t kWB = sizeof(typename F::W);
  constexpr int64_t kXB = sizeof(typename F::X);
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  __m256 summs = _mm256_setzero_ps();
  const __m256i id = PickLanes<R, T>(false);
  const __m256i im = PickLanes<R, T>(true);
  // prod[RingSlot(i)][k] = lane k's d_w * d_x at block i (scale_ring.h).
  alignas(32) float prod[kScaleRing][8];
  // Block i's products into prod[RingSlot(i)], its min terms into summs.
  auto scales = [&](int64_t i) BRAID_VNNI {
    __m256 dw, mw;
    RowScales<R>(w + i * kWB, w_row_bytes, id, im, &dw, &mw);
    _mm256_store_ps(prod[RingSlot(i)],
                    _mm256_mul_ps(dw, TokenLanes<T>(xd + i * ld_s)));
    if constexpr (F::kMin) {
      summs = _mm256_fmadd_ps(mw, TokenLanes<T>(xs + i * ld_s), summs);
    }
  };
  for (int64_t i = 0; i < std::min(kScalesAhead, nb); ++i) scales(i);
  for (int64_t i = 0; i < nb; ++i) {
    if (i + kScalesAhead < nb) scales(i + kScalesAhead);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename F::Prep p = F::Prepare(
          reinterpret_cast<const typename F::W*>(w + r * w_row_bytes)[i]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const auto& xb = *reinterpret_cast<const typename F::X*>(
            x + t * x_row_bytes + i * kXB);
        __m256 sum;
        if constexpr (F::kOffset != 0) {
          sum = F::template Sum<kVnni>(
              p, xb,
              _mm256_load_si256(
                  reinterpret_cast<const __m256i*>(xc + i * ld_c + 8 * t)));
        } else {
          sum = F::template Sum<kVnni>(p, xb);
        }
        acc[r][t] = _mm256_fmadd_ps(
            _mm256_broadcast_ss(&prod[RingSlot(i)][r * T + t]), sum, acc[r][t]);
      }
    }
  }
  StoreTile<F, R, T>(acc, summs, y, ld_y, accumulate);
}

// The activations' scales of tokens [0, n_tok) as f32, [block][token], laid
// out once per call: in `stack` (kStackScales floats each for d and s) when
// they fit, which covers every decode-sized call (a thread's first call of
// a new size allocates nothing, so steps allocate nothing whichever thread
// takes which rows), else in thread_local vectors.
constexpr int64_t kStackScales = 2048;
template <typename F>
BRAID_AVX2 void ScaleTables(const uint8_t* x, size_t x_row_bytes, int64_t nb,
                            int64_t n_tok, float* stack, const float** xd,
                            const float** xs) {
  thread_local std::vector<float> heap_d, heap_s;
  const int64_t need = nb * n_tok + 4;
  float* d = stack;
  float* s = stack + kStackScales;
  if (need > kStackScales) {
    if (heap_d.size() < static_cast<size_t>(need)) heap_d.resize(need);
    if (F::kMin && heap_s.size() < static_cast<size_t>(need)) {
      heap_s.resize(need);
    }
    d = heap_d.data();
    s = heap_s.data();
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xb =
        reinterpret_cast<const typename F::X*>(x + t * x_row_bytes);
    for (int64_t i = 0; i < nb; ++i) {
      d[i * n_tok + t] = H2F(xb[i].d);
      if constexpr (F::kMin) s[i * n_tok + t] = H2F(xb[i].s);
    }
  }
  *xd = d;
  *xs = F::kMin ? s : nullptr;
}

// OffsetFormat's corrections of tokens [ta, tb): for block i and token t,
// 8 lanes of -offset x the sums of the activations' 4-byte groups, at
// i * ld + 8 * (t - ta), ld = 8 * (tb - ta); in `stack` (kStackCorrections
// ints, a decode step's) when they fit, else in a thread_local vector.
constexpr int64_t kStackCorrections = 4096;
template <typename F>
BRAID_AVX2 const int32_t* CorrectionTables(const uint8_t* x, size_t x_row_bytes,
                                           int64_t nb, int64_t ta, int64_t tb,
                                           int32_t* stack) {
  if constexpr (F::kOffset == 0) {
    return nullptr;
  } else {
    thread_local AlignedVector<int32_t> heap;
    const int64_t ld = 8 * (tb - ta);
    int32_t* c = stack;
    if (nb * ld > kStackCorrections) {
      if (heap.size() < static_cast<size_t>(nb * ld)) heap.resize(nb * ld);
      c = heap.data();
    }
    static_assert(F::kOffset == 8, "offset 2^3");
    constexpr int kShift = 3;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t t = ta; t < tb; ++t) {
      const auto* xb =
          reinterpret_cast<const typename F::X*>(x + t * x_row_bytes);
      for (int64_t i = 0; i < nb; ++i) {
        const __m256i sums = _mm256_madd_epi16(
            _mm256_maddubs_epi16(ones8, Load32(xb[i].qs)), ones16);
        _mm256_store_si256(
            reinterpret_cast<__m256i*>(c + i * ld + 8 * (t - ta)),
            _mm256_sub_epi32(_mm256_setzero_si256(),
                             _mm256_slli_epi32(sums, kShift)));
      }
    }
    return c;
  }
}

// Rows [r0, r1) in tiles of kR rows (then single rows), tokens in groups of
// kT (then 2 and 1), in chunks of tokens.
template <typename F, bool kVnni, int kR, int kT>
void RunTiles(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
              size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
              int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
              int64_t prefetch_end) {
  const int64_t nb = n / kQK;
  const float *xd, *xs;
  alignas(32) float stack[2 * kStackScales];
  ScaleTables<F>(x, x_row_bytes, nb, n_tok, stack, &xd, &xs);
  alignas(32) int32_t corrections[kStackCorrections];
  const int32_t* xc = nullptr;  // the chunk's (CorrectionTables)
  // Tokens [ta, tb) of rows from wr (row r): in groups of kT, then 2, 1.
  auto tokens = [&](auto tile1, auto tile2, auto tileT, const uint8_t* wr,
                    int64_t r, int64_t ta, int64_t tb) {
    auto run = [&](auto tile, int64_t t) {
      tile(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes, xd + t,
           xs != nullptr ? xs + t : nullptr, n_tok,
           xc != nullptr ? xc + 8 * (t - ta) : nullptr, 8 * (tb - ta), nb,
           y + t * ld_y + r, ld_y, accumulate);
    };
    int64_t t = ta;
    for (; t + kT <= tb; t += kT) run(tileT, t);
    for (; kT > 2 && t + 2 <= tb; t += 2) run(tile2, t);
    for (; t < tb; ++t) run(tile1, t);
  };
  // Tokens kTokenChunk at a time, each chunk over all the rows: a chunk's
  // activations stay in L1 while the rows stream from L2 (one pass of every
  // row over all the tokens would reload them from L2 for each row tile).
  constexpr int64_t kTokenChunk = 32;
  for (int64_t ta = 0; ta < n_tok; ta += kTokenChunk) {
    const int64_t tb = std::min(n_tok, ta + kTokenChunk);
    xc = CorrectionTables<F>(x, x_row_bytes, nb, ta, tb, corrections);
    int64_t r = r0;
    for (; r + kR <= r1; r += kR) {
      const uint8_t* wr = w + r * w_row_bytes;
      // The rows stream from memory once: fetch the next tile's ahead.
      const uint8_t* ahead = wr + kR * w_row_bytes;
      const uint8_t* ahead_end = w + std::max(r1, prefetch_end) * w_row_bytes;
      for (size_t off = 0; off < kR * w_row_bytes && ahead + off < ahead_end;
           off += 64) {
        PrefetchL1(ahead + off);
      }
      tokens(Tile<F, kR, 1, kVnni>, Tile<F, kR, (kR <= 4 ? 2 : 1), kVnni>,
             Tile<F, kR, kT, kVnni>, wr, r, ta, tb);
    }
    for (; r < r1; ++r) {
      tokens(Tile<F, 1, 1, kVnni>, Tile<F, 1, 2, kVnni>, Tile<F, 1, kT, kVnni>,
             w + r * w_row_bytes, r, ta, tb);
    }
  }
}

// Decode-sized batches favour more rows per tile (more independent weight
// streams); larger batches more tokens per tile (a weight block unpacked once
// for four tokens).
template <typename F, bool kVnni>
void Run(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
         size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1, int64_t n_tok,
         float* y, int64_t ld_y, bool accumulate, int64_t prefetch_end) {
  if (F::kOffset != 0 && n_tok >= 8) {
    // A block of these unpacks costlier than it multiplies: one row, 8
    // tokens.
    RunTiles<F, kVnni, 1, 8>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
                             y, ld_y, accumulate, prefetch_end);
  } else if (n_tok >= 4) {
    RunTiles<F, kVnni, 2, 4>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
                             y, ld_y, accumulate, prefetch_end);
  } else if (n_tok >= 2) {
    RunTiles<F, kVnni, 4, 2>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
                             y, ld_y, accumulate, prefetch_end);
  } else {
    RunTiles<F, kVnni, 8, 1>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
                             y, ld_y, accumulate, prefetch_end);
  }
}

template <typename F>
void Dispatch(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
              size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
              int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
              int64_t prefetch_end) {
  if (UseAvxVnni()) {
    Run<F, true>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                 accumulate, prefetch_end);
  } else {
    Run<F, false>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                  accumulate, prefetch_end);
  }
}

}  // namespace

bool GemmTileAvx2(DType type, const uint8_t* w, size_t w_row_bytes,
                  const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                  int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                  bool accumulate, int64_t prefetch_end) {
  switch (type) {
    case DType::kQ4_0:
      Dispatch<Q40>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                    accumulate, prefetch_end);
      return true;
    case DType::kQ4_1:
      Dispatch<Q41>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                    accumulate, prefetch_end);
      return true;
    case DType::kQ8_0:
      Dispatch<Q80>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                    accumulate, prefetch_end);
      return true;
    case DType::kQ5_1:
      Dispatch<Q51>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                    accumulate, prefetch_end);
      return true;
    case DType::kIQ4_NL:
      Dispatch<IQ4NL>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
                      accumulate, prefetch_end);
      return true;
    default:
      return false;
  }
}

}  // namespace braid::kernels::cpu::internal
