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
// _mm512_undefined_* placeholders (GCC bug 105593), and -Wuninitialized on
// _mm512_shuffle_f32x4's.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

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
  BRAID_AVX512 static __m512i Dot(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, w, x);  // w unsigned, x signed
  }
  // Quad layout (RepackQuads): a block of 4 rows is their 4 (d, m) pairs,
  // then rows 0 and 1's quants with their 32-bit groups alternating, then
  // rows 2 and 3's.
  static constexpr int kQuadPairOffset = 16;
  static constexpr int kQuadPairBytes = 32;
  // The 4 rows' (d, m) as f32 [d0 m0 d1 m1 d2 m2 d3 m3] in lanes 0..7.
  BRAID_AVX512 static __m512 QuadScales(const uint8_t* b) {
    return _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))));
  }
  // Row pair h of a quad block: lanes 2k and 2k + 1 hold ggml's group k of
  // the pair's first and second row.
  BRAID_AVX512 static __m512i QuadPair(const uint8_t* b, int h) {
    const __m512i q = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * h)));
    return _mm512_and_si512(
        _mm512_srlv_epi64(q, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)),
        _mm512_set1_epi8(0x0F));
  }
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
};

// Q8_0 x Q8_0: signed weights, offset by 128 (see the file comment).
struct Q80 {
  using W = BlockQ8_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kSigned = true;
  static constexpr int kQsOffset = 2;
  static constexpr int kXQsOffset = 2;
  // x + 128 unsigned (the quad tiles' layout), w signed.
  BRAID_AVX512 static __m512i Dot(__m512i start, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(start, x, w);
  }
  // Quad layout: the 4 rows' d, then rows 0 and 1's quants with their
  // 32-bit groups alternating, then rows 2 and 3's.
  static constexpr int kQuadPairOffset = 8;
  static constexpr int kQuadPairBytes = 64;
  // [d0 0 d1 0 d2 0 d3 0] in lanes 0..7 (Q4_1's places of d).
  BRAID_AVX512 static __m512 QuadScales(const uint8_t* b) {
    const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
    return _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_unpacklo_epi16(d, _mm_setzero_si128())));
  }
  BRAID_AVX512 static __m512i QuadPair(const uint8_t* b, int h) {
    return _mm512_loadu_si512(b + 8 + 64 * h);
  }
  BRAID_AVX512 static __m512i Pair(const uint8_t* p, size_t row_bytes) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + row_bytes));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
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

// Quad tiles, on weights in the quad layout (RepackQuads), batches of 3+
// tokens: 4 rows x T tokens (T = 4 or 8). A 512-bit accumulator holds two
// rows r and r + 1 of one token, interleaved: lane 2k is ggml's accumulator
// lane k of (r, t), lane 2k + 1 that of (r + 1, t). The layout stores the
// two rows' quants interleaved the same way (F::QuadPair unpacks them with
// one shift and mask), and each token's activation block is laid out once
// per call with its 32-bit groups doubled (LayOutQuads), so one dpbusd
// gives both elements' exact integer block sums, and a weight block is
// unpacked once for the T tokens. The products d_w(r) * d_x(t) and
// d_w(r + 1) * d_x(t) are adjacent in a table computed ahead for a segment
// of blocks (16 products per multiply, from the 4 rows' scales, one load,
// and the activations' scales laid out 4 times each, dpat), so the fma
// takes them as one 64-bit broadcast: per element pair and block the vector
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

// w: 4 rows in the quad layout (RepackQuads), block i at w + 4 * i *
// sizeof(block).
template <typename F, int T>
BRAID_AVX512 void QuadTile(const uint8_t* w, const uint8_t* xq,
                           int64_t quad_bytes, const float* dpat,
                           const float* spat, int64_t quad_floats, int64_t nb,
                           int n_valid, float* y, int64_t ld_y,
                           bool accumulate) {
  static_assert(T == 4 || T == 8, "tile shape");
  constexpr int U = T / 4;  // quads
  constexpr int64_t kWB = sizeof(typename F::W);
  constexpr int kSeg = 16;
  // prod[s][4t + r] = d_w(r) * d_x(t) at block i0 + s.
  alignas(64) float prod[kSeg][4 * T];
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
  for (int64_t i0 = 0; i0 < nb; i0 += kSeg) {
    const int ns = static_cast<int>(std::min<int64_t>(kSeg, nb - i0));
    for (int s = 0; s < ns; ++s) {
      // prod[s] and the min terms from the 4 rows' (d, m).
      const int64_t i = i0 + s;
      const __m512 dm = F::QuadScales(w + 4 * i * kWB);
      const __m512 dw = _mm512_permutexvar_ps(pick_d, dm);
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) {
        _mm512_store_ps(
            prod[s] + 16 * u,
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
    }
    for (int s = 0; s < ns; ++s) {
      const int64_t i = i0 + s;
      const __m512i q0 = F::QuadPair(w + 4 * i * kWB, 0);
      const __m512i q1 = F::QuadPair(w + 4 * i * kWB, 1);
      // Signed weights: the activations are x + 128 (unsigned), so each
      // lane starts at -128 * sum(w) of its group.
      __m512i start0 = _mm512_setzero_si512(), start1 = start0;
      if constexpr (F::kSigned) {
        const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
        start0 =
            _mm512_sub_epi32(start0, _mm512_dpbusd_epi32(start0, k128, q0));
        start1 =
            _mm512_sub_epi32(start1, _mm512_dpbusd_epi32(start1, k128, q1));
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int64_t off = (t / 4) * quad_bytes + (i * 4 + t % 4) * 64;
        const __m512i xv = _mm512_load_si512(xq + off);
        double pr[2];
        std::memcpy(pr, &prod[s][4 * t], 16);
        acc[0][t] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr[0])),
                                    _mm512_cvtepi32_ps(F::Dot(start0, q0, xv)),
                                    acc[0][t]);
        acc[1][t] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pr[1])),
                                    _mm512_cvtepi32_ps(F::Dot(start1, q1, xv)),
                                    acc[1][t]);
      }
    }
  }
#pragma GCC unroll 2
  for (int u = 0; u < U; ++u) {
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

// Lays out tokens [t0, t1) of a chunk of nc tokens' activations in quads
// (see QuadTile): each block's 32-bit groups doubled (xq; signed weights'
// activations + 128), and the scales (and Q4_1's sums) four times each
// (dpat, spat); with t1 == nc also the last quad's tokens past nc, as zeros.
template <typename F>
BRAID_AVX512 void LayOutQuads(const uint8_t* x, size_t x_row_bytes, int64_t nc,
                              int64_t nb, int64_t t0, int64_t t1, uint8_t* xq,
                              float* dpat, float* spat) {
  constexpr int64_t kXB = sizeof(typename F::X);
  const __m512i dup =
      _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const int64_t end = t1 == nc ? (nc + 3) / 4 * 4 : t1;
  for (int64_t t = t0; t < end; ++t) {
    const int64_t qd = t / 4, j = t % 4;
    for (int64_t i = 0; i < nb; ++i) {
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
                              bool accumulate) {
  const uint8_t* wr = w + r * w_row_bytes;
  const int64_t quad_bytes = nb * 4 * 64;
  const int64_t quad_floats = nb * 16;
  for (int64_t t = 0; t < nc; t += 8) {
    const int n_valid = static_cast<int>(std::min<int64_t>(8, nc - t));
    const int64_t qd = t / 4;
    auto run = [&](auto tile) {
      tile(wr, xq + qd * quad_bytes, quad_bytes, dpat + qd * quad_floats,
           spat + qd * quad_floats, quad_floats, nb, n_valid, y + t * ld_y + r,
           ld_y, accumulate);
    };
    if (n_valid > 4) {
      run(QuadTile<F, 8>);
    } else {
      run(QuadTile<F, 4>);
    }
  }
}

// Batches of 1 or 2 tokens on the quad layout: 4Q rows (Q quads) x T
// tokens, the accumulators as in QuadTile (row pairs interleaved), so a
// block's unpacked row pair serves T tokens and its 64-bit product pair
// comes from a table computed ahead per segment (4Q products per multiply).
// The 8-lane sums: QuadSums with rows 4j..4j + 3 in 128-bit lane j.
template <typename F, int T, int Q>
BRAID_AVX512 void RowQuadTile(const uint8_t* w, const uint8_t* xq,
                              const float* dpat, const float* spat, int64_t nb,
                              int n_valid, float* y, int64_t ld_y,
                              bool accumulate) {
  static_assert((T == 1 || T == 2) && (Q == 1 || Q == 4), "tile shape");
  constexpr int P = 2 * Q;                            // row pairs
  constexpr int64_t kQB = 4 * sizeof(typename F::W);  // a quad's block
  constexpr int kSeg = 16;
  // prod[s][t][r] = d_w(r) * d_x(t) at block i0 + s (r < 4Q).
  alignas(64) float prod[kSeg][T][16];
  __m512 acc[P][T];
  __m512 summs[T];  // lanes: rows
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) summs[t] = _mm512_setzero_ps();
  // Of quads g's [d0 m0 d1 m1 d2 m2 d3 m3] at lanes 8g..8g + 7 of two
  // registers (g = 0, 1 | 2, 3): every d (m) in row order.
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12,
                                        10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const int64_t quad_stride = nb * kQB;  // bytes from quad to quad
  for (int64_t i0 = 0; i0 < nb; i0 += kSeg) {
    const int ns = static_cast<int>(std::min<int64_t>(kSeg, nb - i0));
    for (int s = 0; s < ns; ++s) {
      const int64_t i = i0 + s;
      const uint8_t* b = w + i * kQB;
      __m512 dw, mw;
      if constexpr (Q == 4) {
        const __m512 lo = _mm512_insertf32x8(
            F::QuadScales(b),
            _mm512_castps512_ps256(F::QuadScales(b + quad_stride)), 1);
        const __m512 hi = _mm512_insertf32x8(
            F::QuadScales(b + 2 * quad_stride),
            _mm512_castps512_ps256(F::QuadScales(b + 3 * quad_stride)), 1);
        dw = _mm512_permutex2var_ps(lo, even, hi);
        mw = _mm512_permutex2var_ps(lo, odd, hi);
      } else {
        const __m512 dm = F::QuadScales(b);
        dw = _mm512_permutexvar_ps(even, dm);
        mw = _mm512_permutexvar_ps(odd, dm);
      }
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        // The tables' scales of token t at block i (quad 0 of tokens).
        const int64_t at = (i * 4 + t) * 4;
        _mm512_store_ps(prod[s][t],
                        _mm512_mul_ps(dw, _mm512_set1_ps(dpat[at])));
        if constexpr (F::kMin) {
          summs[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(spat[at]), summs[t]);
        }
      }
    }
    for (int s = 0; s < ns; ++s) {
      const int64_t i = i0 + s;
      __m512i xv[T];
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        xv[t] = _mm512_load_si512(xq + (i * 4 + t) * 64);
      }
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m512i q =
            F::QuadPair(w + (p / 2) * quad_stride + i * kQB, p % 2);
        __m512i start = _mm512_setzero_si512();
        if constexpr (F::kSigned) {
          start = _mm512_sub_epi32(
              start, _mm512_dpbusd_epi32(
                         start, _mm512_set1_epi8(static_cast<char>(0x80)), q));
        }
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          double pr;
          std::memcpy(&pr, &prod[s][t][2 * p], 8);
          acc[p][t] = _mm512_fmadd_ps(
              _mm512_castpd_ps(_mm512_set1_pd(pr)),
              _mm512_cvtepi32_ps(F::Dot(start, q, xv[t])), acc[p][t]);
        }
      }
    }
  }
#pragma GCC unroll 2
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
    if constexpr (F::kMin) v = _mm512_add_ps(v, summs[t]);
    constexpr __mmask16 kRows = Q == 4 ? 0xFFFF : 0x000F;
    float* dst = y + t * ld_y;
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(kRows, dst), v);
    _mm512_mask_storeu_ps(dst, kRows, v);
  }
}

// How far ahead (in rows) weights are prefetched into L2: 32 rows, 8 quad
// tiles or 2 row-quad tiles (128 rows for the 16-row tiles: one-stream
// decode 392 -> 416-420 tok/s at 32, 16 or 48 rows; 8 streams unchanged).
constexpr int64_t kFarRows = 32;

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
// aligned buffer (byte offsets, each a multiple of 64): f32 scales
// [block][token] (xd; Q4_1's sums in xs) for the row tiles, and for the
// quad tiles (quads: batches of 3+ tokens) the quad layout (see QuadTile).
struct TableLayout {
  size_t xd = 0, xs = 0, xq = 0, dpat = 0, spat = 0, bytes = 0;
};
TableLayout LayOutTables(int64_t nb, int64_t nc, bool quads) {
  auto round64 = [](size_t b) { return (b + 63) / 64 * 64; };
  TableLayout t;
  const size_t scales = round64(static_cast<size_t>(nb * nc) * sizeof(float));
  t.xs = scales;
  size_t at = 2 * scales;
  if (quads) {
    const size_t tokens = static_cast<size_t>((nc + 3) / 4 * 4);
    const size_t q = tokens * nb * 64, pat = tokens * nb * 4 * sizeof(float);
    t.xq = at;
    t.dpat = at + q;
    t.spat = at + q + pat;
    at += q + 2 * pat;
  }
  t.bytes = at;
  return t;
}

// Fills tokens [t0, t1) of the tables of a chunk of nc tokens (row stride
// x_row_bytes; xc is token 0) into buf (laid out as LayOutTables says).
template <typename F>
BRAID_AVX512 GemmTileActivations PrepareChunk(const uint8_t* xc,
                                              size_t x_row_bytes, int64_t nc,
                                              int64_t nb, bool quads,
                                              uint8_t* buf, int64_t t0,
                                              int64_t t1) {
  constexpr int64_t kXB = sizeof(typename F::X);
  const TableLayout l = LayOutTables(nb, nc, quads);
  GemmTileActivations out;
  float* xd = reinterpret_cast<float*>(buf + l.xd);
  float* xs = reinterpret_cast<float*>(buf + l.xs);
  // The row tiles' scales (the quad tiles have their own).
  for (int64_t t = t0; t < t1 && !quads; ++t) {
    const uint8_t* xt = xc + t * x_row_bytes;
    for (int64_t i = 0; i < nb; ++i) {
      uint16_t h[2];
      std::memcpy(h, xt + i * kXB, 4);
      xd[i * nc + t] = _cvtsh_ss(h[0]);
      if constexpr (F::kMin) xs[i * nc + t] = _cvtsh_ss(h[1]);
    }
  }
  out.xd = xd;
  out.xs = xs;
  if (quads) {
    out.xq = buf + l.xq;
    out.dpat = reinterpret_cast<float*>(buf + l.dpat);
    out.spat = reinterpret_cast<float*>(buf + l.spat);
    LayOutQuads<F>(xc, x_row_bytes, nc, nb, t0, t1, buf + l.xq,
                   reinterpret_cast<float*>(buf + l.dpat),
                   reinterpret_cast<float*>(buf + l.spat));
  }
  out.n_tok = nc;
  return out;
}

uint8_t* Align64(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) &
                                    ~uintptr_t{63});
}

template <typename F>
BRAID_AVX512 void Run(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                      size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
                      int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
                      DType type, const GemmTileActivations* prepared,
                      bool quad_layout) {
  const int64_t nb = n / kQK;
  const int64_t chunk = ChunkTokens(nb);
  if (nb * chunk > kScaleFloats) {  // Rows too long for the tables.
    // (CanRepackQuads rules this out for the quad layout.)
    GemmTileAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y,
                 ld_y, accumulate);
    return;
  }
  // The quad layout: quad tiles (4 rows) for 3+ tokens, row-quad tiles of
  // 16 rows (and single quads) for 1 or 2, all on the quad tables. GGUF
  // rows: the row tiles, 8 rows for decode-sized batches, else 4.
  const bool quads = quad_layout;
  // Tables laid out once for the whole call (one chunk of tokens), or
  // here, per chunk.
  const bool use_prepared = prepared != nullptr && prepared->n_tok == n_tok &&
                            n_tok <= chunk &&
                            quads == (prepared->xq != nullptr);
  thread_local std::vector<uint8_t> table_buf;
  uint8_t* buf = nullptr;
  if (!use_prepared) {
    const size_t need = LayOutTables(nb, chunk, quads).bytes + 64;
    if (table_buf.size() < need) table_buf.resize(need);
    buf = Align64(table_buf.data());
  }
  for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
    const int64_t nc = std::min(chunk, n_tok - t0);
    const uint8_t* xc = x + t0 * x_row_bytes;
    const GemmTileActivations tab =
        use_prepared
            ? *prepared
            : PrepareChunk<F>(xc, x_row_bytes, nc, nb, quads, buf, 0, nc);
    float* yc = y + t0 * ld_y;
    // Per chunk: the last chunk of a long batch may hold 1 or 2 tokens.
    const int R = quad_layout ? (nc >= 3 ? 4 : 16) : n_tok < 4 ? 8 : 4;
    const int64_t r_end = r0 + (r1 - r0) / R * R;
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
        // And the rows kFarRows ahead into L2, so their DRAM latency
        // overlaps several tiles' arithmetic (8-sequence decode ~3%
        // faster, best of 5 alternating runs; one stream unchanged).
        const uint8_t* far = w + (r + kFarRows) * w_row_bytes;
        const uint8_t* far_end = std::min(far + R * w_row_bytes, ahead_end);
        for (const uint8_t* p = far; p < far_end; p += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
        }
      }
      if (quad_layout && nc <= 2) {
        auto tile = nc == 2 ? RowQuadTile<F, 2, 4> : RowQuadTile<F, 1, 4>;
        tile(w + r * w_row_bytes, tab.xq, tab.dpat, tab.spat, nb,
             static_cast<int>(nc), yc + r, ld_y, accumulate);
      } else if (quad_layout) {
        RunQuadRows<F>(w, w_row_bytes, tab.xq, tab.dpat, tab.spat, nb, r, nc,
                       yc, ld_y, accumulate);
      } else if (R == 8) {
        RunRows<F, 8>(w, w_row_bytes, xc, x_row_bytes, tab.xd, tab.xs, nc, nb,
                      r, nc, yc, ld_y, accumulate);
      } else {
        RunRows<F, 4>(w, w_row_bytes, xc, x_row_bytes, tab.xd, tab.xs, nc, nb,
                      r, nc, yc, ld_y, accumulate);
      }
    }
    if (quad_layout) {  // Quads left over from the 16-row tiles.
      for (int64_t r = r_end; r < r1; r += 4) {
        auto tile = nc == 2 ? RowQuadTile<F, 2, 1> : RowQuadTile<F, 1, 1>;
        tile(w + r * w_row_bytes, tab.xq, tab.dpat, tab.spat, nb,
             static_cast<int>(nc), yc + r, ld_y, accumulate);
      }
    } else if (r_end < r1) {
      GemmTileAvx2(type, w, w_row_bytes, xc, x_row_bytes, n, r_end, r1, nc, yc,
                   ld_y, accumulate);
    }
  }
}

}  // namespace

bool GemmTileAvx512(DType type, const uint8_t* w, size_t w_row_bytes,
                    const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
                    int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
                    bool accumulate, const GemmTileActivations* prepared,
                    bool quad_layout) {
  switch (type) {
    case DType::kQ4_1:
      Run<Q41>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, quad_layout);
      return true;
    case DType::kQ8_0:
      Run<Q80>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok, y, ld_y,
               accumulate, type, prepared, quad_layout);
      return true;
    default:
      return false;
  }
}

namespace {

// Whether the AVX-512 tiles take prepared tables for this call.
bool TakesPrepared(DType type, int64_t n, int64_t n_tok) {
  if (type != DType::kQ4_1 && type != DType::kQ8_0) return false;
  const int64_t nb = n / kQK;
  return n_tok >= 1 && n_tok <= ChunkTokens(nb) &&
         nb * ChunkTokens(nb) <= kScaleFloats;
}

}  // namespace

size_t GemmTileActivationsBytesAvx512(DType type, int64_t n, int64_t n_tok) {
  if (!TakesPrepared(type, n, n_tok)) return 0;
  return LayOutTables(n / kQK, n_tok, true).bytes + 64;  // + alignment
}

BRAID_AVX512 bool PrepareGemmTileActivationsAvx512(
    DType type, const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t n_tok,
    uint8_t* buf, GemmTileActivations* out, int64_t t0, int64_t t1,
    bool quad_layout) {
  if (!TakesPrepared(type, n, n_tok)) return false;
  uint8_t* p = Align64(buf);
  const int64_t nb = n / kQK;
  const bool quads = quad_layout;
  *out = type == DType::kQ4_1
             ? PrepareChunk<Q41>(x, x_row_bytes, n_tok, nb, quads, p, t0, t1)
             : PrepareChunk<Q80>(x, x_row_bytes, n_tok, nb, quads, p, t0, t1);
  return true;
}

}  // namespace braid::kernels::cpu::internal
