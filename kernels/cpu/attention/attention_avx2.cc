// AVX2 forms of attention's two products (attention_kernels.h), for CPUs
// without AVX-512, with the bits of the portable kernels.
//
// Scores: each K row is converted from fp16 once for the query heads that
// share its KV head, and a key's 16-lane partial vector is formed per head
// exactly as DotF16F32VecAvx2 / DotF16F32GemmAvx2 form it (lanes 0..7 and
// 8..15 as two 8-lane halves), its halves added (the first level of
// ReduceAdd16) and the results of 8 keys reduced together by a transpose
// tree with HorizontalSum8's additions.
//
// Weighted V sums: per element the operations of WeightedSumF16Avx512
// (attention_avx512.cc), 8 dims a pass instead of 16.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/attention/attention_kernels.h"
#include "kernels/cpu/attention/attention_paged.h"
#include "kernels/cpu/ggml_reduce.h"

#define BRAID_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX2 inline __m256 LoadF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Heads [0, g) over keys [0, n); C = head_dim / 16.
template <int C>
BRAID_AVX2 void Scores8(const uint16_t* const* k_rows, int64_t n,
                        const float* const* q, int g, bool gemm, float* scores,
                        int64_t ld) {
  alignas(32) __m256 part[kMaxRows][8];
  for (int64_t j0 = 0; j0 < n; j0 += 8) {
    const int m = static_cast<int>(n - j0 < 8 ? n - j0 : 8);
    for (int jj = 0; jj < 8; ++jj) {
      if (jj >= m) {
        for (int h = 0; h < g; ++h) part[h][jj] = _mm256_setzero_ps();
        continue;
      }
      const uint16_t* kr = k_rows[j0 + jj];
      __m256 lo[C], hi[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        lo[c] = LoadF16x8(kr + 16 * c);
        hi[c] = LoadF16x8(kr + 16 * c + 8);
      }
      for (int h = 0; h < g; ++h) {
        const float* qh = q[h];
        if (gemm) {
          // One accumulator over the row (DotF16F32GemmAvx2; its first fma
          // onto +0 as a multiply, as the AVX-512 form).
          __m256 al = _mm256_mul_ps(lo[0], _mm256_loadu_ps(qh));
          __m256 ah = _mm256_mul_ps(hi[0], _mm256_loadu_ps(qh + 8));
#pragma GCC unroll 16
          for (int c = 1; c < C; ++c) {
            al = _mm256_fmadd_ps(lo[c], _mm256_loadu_ps(qh + 16 * c), al);
            ah = _mm256_fmadd_ps(hi[c], _mm256_loadu_ps(qh + 16 * c + 8), ah);
          }
          part[h][jj] = _mm256_add_ps(al, ah);
        } else {
          // Four accumulators over steps of 64 (DotF16F32VecAvx2).
          __m256 al[4], ah[4];
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            al[c] = _mm256_mul_ps(lo[c], _mm256_loadu_ps(qh + 16 * c));
            ah[c] = _mm256_mul_ps(hi[c], _mm256_loadu_ps(qh + 16 * c + 8));
          }
#pragma GCC unroll 16
          for (int c = 4; c < C; ++c) {
            al[c % 4] =
                _mm256_fmadd_ps(lo[c], _mm256_loadu_ps(qh + 16 * c), al[c % 4]);
            ah[c % 4] = _mm256_fmadd_ps(hi[c], _mm256_loadu_ps(qh + 16 * c + 8),
                                        ah[c % 4]);
          }
          const __m256 l = _mm256_add_ps(_mm256_add_ps(al[0], al[2]),
                                         _mm256_add_ps(al[1], al[3]));
          const __m256 r = _mm256_add_ps(_mm256_add_ps(ah[0], ah[2]),
                                         _mm256_add_ps(ah[1], ah[3]));
          part[h][jj] = _mm256_add_ps(l, r);
        }
      }
    }
    for (int h = 0; h < g; ++h) {
      const __m256 sums = HorizontalSum8x8(part[h]);
      if (m == 8) {
        _mm256_storeu_ps(scores + h * ld + j0, sums);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, sums);
        for (int i = 0; i < m; ++i) scores[h * ld + j0 + i] = tmp[i];
      }
    }
  }
}

// Residue r of the slots (slot = r + 8i, i < A = slots / 8), 8 dims at dim0:
// for every head, the slot sums over keys j = slot (mod slots) in j order,
// then combined as ReduceSlots' first levels combine them (slot s + 32 into
// s, s + 16 into s, s + 8 into s): ((a0 + a4) + (a2 + a6)) + ((a1 + a5) +
// (a3 + a7)) for 64 slots, a0 + a1 for 16. Unused slots stay +0, which adds
// nothing (no slot sum is -0: they start at +0).
template <int G, int A>
BRAID_AVX2 void Residue8(const uint16_t* const* v_rows, int64_t n,
                         const float* w, int64_t ldw, int r, int64_t dim0,
                         __m256* out) {
  __m256 a[A][G];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i) {
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) a[i][h] = _mm256_setzero_ps();
  }
  for (int64_t j0 = r; j0 < n; j0 += 8 * A) {
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) {
      const int64_t j = j0 + 8 * i;
      if (j >= n) break;
      const __m256 vv = LoadF16x8(v_rows[j] + dim0);
#pragma GCC unroll 4
      for (int h = 0; h < G; ++h) {
        a[i][h] = _mm256_fmadd_ps(_mm256_set1_ps(w[h * ldw + j]), vv, a[i][h]);
      }
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < G; ++h) {
    if constexpr (A == 8) {
      out[h] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0][h], a[4][h]),
                                           _mm256_add_ps(a[2][h], a[6][h])),
                             _mm256_add_ps(_mm256_add_ps(a[1][h], a[5][h]),
                                           _mm256_add_ps(a[3][h], a[7][h])));
    } else {
      out[h] = _mm256_add_ps(a[0][h], a[1][h]);
    }
  }
}

// The weighted V sums of G heads, reduced in ReduceSlots' order, into
// out[h][0..head_dim).
template <int G, int A>
BRAID_AVX2 void WeightedSum8(const uint16_t* const* v_rows, int64_t n,
                             const float* w, int64_t ldw, int64_t head_dim,
                             float* const* out) {
  for (int64_t d = 0; d < head_dim; d += 8) {
    __m256 res[8][G];  // per residue r: the combined slot sums of each head
    for (int r = 0; r < 8; ++r) {
      Residue8<G, A>(v_rows, n, w, ldw, r, d, res[r]);
    }
    // Then ggml's lane tree over the residues: r += r + 4, 0 += 2, 1 += 3,
    // 0 += 1.
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
      const __m256 d0 = _mm256_add_ps(res[0][h], res[4][h]);
      const __m256 d1 = _mm256_add_ps(res[1][h], res[5][h]);
      const __m256 d2 = _mm256_add_ps(res[2][h], res[6][h]);
      const __m256 d3 = _mm256_add_ps(res[3][h], res[7][h]);
      _mm256_storeu_ps(out[h] + d, _mm256_add_ps(_mm256_add_ps(d0, d2),
                                                 _mm256_add_ps(d1, d3)));
    }
  }
}

}  // namespace

bool ScoresF16Avx2(const uint16_t* const* k_rows, int64_t n,
                   const float* const* q, int g, int64_t head_dim, bool gemm,
                   float* scores, int64_t ld) {
  if (g > kMaxRows) return false;
  if (head_dim == 64) {
    Scores8<4>(k_rows, n, q, g, gemm, scores, ld);
  } else if (head_dim == 128) {
    Scores8<8>(k_rows, n, q, g, gemm, scores, ld);
  } else {
    return false;
  }
  return true;
}

bool WeightedSumF16Avx2(const uint16_t* const* v_rows, int64_t n,
                        const float* w, int64_t ldw, int g, int64_t head_dim,
                        int64_t slots, float* const* out) {
  if (head_dim % 8 != 0 || head_dim > 256 || (slots != 16 && slots != 64)) {
    return false;
  }
  // Heads a pass: their slot accumulators fit the 16 registers (8 a head
  // for 64 slots, 2 for 16).
  const int per_pass = slots == 64 ? 1 : 4;
  for (int h0 = 0; h0 < g; h0 += per_pass) {
    const int gs = std::min(per_pass, g - h0);
    const float* wh = w + h0 * ldw;
    float* const* oh = out + h0;
    if (slots == 64) {
      WeightedSum8<1, 8>(v_rows, n, wh, ldw, head_dim, oh);
    } else if (gs == 1) {
      WeightedSum8<1, 2>(v_rows, n, wh, ldw, head_dim, oh);
    } else if (gs == 2) {
      WeightedSum8<2, 2>(v_rows, n, wh, ldw, head_dim, oh);
    } else if (gs == 3) {
      WeightedSum8<3, 2>(v_rows, n, wh, ldw, head_dim, oh);
    } else {
      WeightedSum8<4, 2>(v_rows, n, wh, ldw, head_dim, oh);
    }
  }
  return true;
}

}  // namespace braid::kernels::cpu::internal
