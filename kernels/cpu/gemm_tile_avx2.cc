// AVX2 tiles for GemmTile. Per output element the operations are those of
// dot_avx2.cc: per block, an integer block sum (maddubs + madd, or VNNI's
// dpbusd where the CPU has it: the same exact integers), converted to float
// and fused-multiply-added into one 8-lane accumulator in block order, then
// HorizontalSum8; Q4_1 adds its min-term sum, accumulated in block order.
#include <immintrin.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BRAID_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

BRAID_AVX2 inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp),
                                                _mm_srli_epi16(tmp, 4), 1);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
}

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
struct Q40 {
  using W = BlockQ4_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  struct Prep {
    __m256i abs_w;  // |q - 8|
    __m256i w;      // q - 8 (for the sign)
    float d, m;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) {
    const __m256i q = _mm256_sub_epi8(UnpackNibbles(b.qs), _mm256_set1_epi8(8));
    return {_mm256_sign_epi8(q, q), q, H2F(b.d), 0.0f};
  }
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x) {
    return MulSumU8I8<kVnni>(p.abs_w, _mm256_sign_epi8(Load32(x.qs), p.w));
  }
  BRAID_AVX2 static float XScale(const X& x) { return H2F(x.d); }
};

struct Q80 {
  using W = BlockQ8_0;
  using X = BlockQ8_0;
  static constexpr bool kMin = false;
  struct Prep {
    __m256i abs_w, w;
    float d, m;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) {
    const __m256i q = Load32(b.qs);
    return {_mm256_sign_epi8(q, q), q, H2F(b.d), 0.0f};
  }
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x) {
    return MulSumU8I8<kVnni>(p.abs_w, _mm256_sign_epi8(Load32(x.qs), p.w));
  }
  BRAID_AVX2 static float XScale(const X& x) { return H2F(x.d); }
};

struct Q41 {
  using W = BlockQ4_1;
  using X = BlockQ8_1;
  static constexpr bool kMin = true;
  struct Prep {
    __m256i w;
    float d, m;
  };
  BRAID_AVX2 static Prep Prepare(const W& b) {
    return {UnpackNibbles(b.qs), H2F(b.d), H2F(b.m)};
  }
  template <bool kVnni>
  BRAID_VNNI static __m256 Sum(const Prep& p, const X& x) {
    return MulSumU8I8<kVnni>(p.w, Load32(x.qs));
  }
  BRAID_AVX2 static float XScale(const X& x) { return H2F(x.d); }
};

// R rows x T tokens; element (r, t) follows the row dot's order exactly.
template <typename F, int R, int T, bool kVnni>
BRAID_VNNI void Tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
                     size_t x_row_bytes, int64_t nb, float* y, int64_t ld_y,
                     bool accumulate) {
  __m256 acc[R][T];
  float summs[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      summs[r][t] = 0.0f;
    }
  }
  for (int64_t i = 0; i < nb; ++i) {
    typename F::Prep p[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      p[r] = F::Prepare(
          reinterpret_cast<const typename F::W*>(w + r * w_row_bytes)[i]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto& xb =
          reinterpret_cast<const typename F::X*>(x + t * x_row_bytes)[i];
      const float xd = F::XScale(xb);
      float xs = 0.0f;
      if constexpr (F::kMin) xs = H2F(xb.s);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (F::kMin) summs[r][t] += p[r].m * xs;
        const __m256 d = _mm256_set1_ps(p[r].d * xd);
        acc[r][t] =
            _mm256_fmadd_ps(d, F::template Sum<kVnni>(p[r], xb), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float v = HorizontalSum8(acc[r][t]);
      if constexpr (F::kMin) v = v + summs[r][t];
      float& out = y[t * ld_y + r];
      out = accumulate ? out + v : v;
    }
  }
}

template <typename F, bool kVnni, int kR, int kT>
void RunTiles(const uint8_t* w, size_t w_row_bytes, const uint8_t* x,
              size_t x_row_bytes, int64_t n, int64_t r0, int64_t r1,
              int64_t n_tok, float* y, int64_t ld_y, bool accumulate,
              int64_t prefetch_end) {
  const int64_t nb = n / kQK;
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
    int64_t t = 0;
    for (; t + kT <= n_tok; t += kT) {
      Tile<F, kR, kT, kVnni>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes,
                             nb, y + t * ld_y + r, ld_y, accumulate);
    }
    for (; t < n_tok; ++t) {
      Tile<F, kR, 1, kVnni>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes,
                            nb, y + t * ld_y + r, ld_y, accumulate);
    }
  }
  for (; r < r1; ++r) {
    const uint8_t* wr = w + r * w_row_bytes;
    int64_t t = 0;
    for (; t + kT <= n_tok; t += kT) {
      Tile<F, 1, kT, kVnni>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes,
                            nb, y + t * ld_y + r, ld_y, accumulate);
    }
    for (; t < n_tok; ++t) {
      Tile<F, 1, 1, kVnni>(wr, w_row_bytes, x + t * x_row_bytes, x_row_bytes,
                           nb, y + t * ld_y + r, ld_y, accumulate);
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
  if (n_tok >= 4) {
    RunTiles<F, kVnni, 2, 4>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
                             y, ld_y, accumulate, prefetch_end);
  } else {
    RunTiles<F, kVnni, 4, 2>(w, w_row_bytes, x, x_row_bytes, n, r0, r1, n_tok,
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
    default:
      return false;
  }
}

}  // namespace braid::kernels::cpu::internal
