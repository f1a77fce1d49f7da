// AVX-512 forms of the two products of attention (attention_kernels.h) for
// the query heads that share one KV head: each K and V row is loaded and
// converted from fp16 once for all of them.
//
// Scores: a key's 16-lane partial vector is formed per head exactly as
// DotF16F32Vec / DotF16F32Gemm form it (dot_avx512.cc), then the vectors of
// 16 keys are reduced together by a transpose tree whose adds pair the lanes
// of each vector as ReduceAdd16 does (i + (i + 8), then i + (i + 4), then
// (0 + 2) + (1 + 3)), so every score has the bits of the row dot.
//
// Slot sums: slot s accumulates, in key order, one fused multiply-add per
// element of w[j] * V[j] over the keys j = s (mod slots), the partial row of
// ggml's accumulator lane s. One pass per slot keeps the slot's row of every
// head in registers instead of reloading and storing it per key.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>

#include "kernels/cpu/attention_kernels.h"

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX512 inline __m512 LoadF16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// out lane j = ReduceAdd16(v[j]) for j < 16 (ggml_reduce.h's tree).
BRAID_AVX512 inline __m512 ReduceAdd16x16(const __m512* v) {
  // i + (i + 8): two vectors per register, [a lanes 0..7 | b lanes 0..7].
  __m512 t[8];
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[2 * i], b = v[2 * i + 1];
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // i + (i + 4): four vectors per register, 128-bit block k = vector k.
  __m512 u[4];
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    const __m512 a = t[2 * i], b = t[2 * i + 1];
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // (0 + 2) and (1 + 3), then their sum; block k ends as
  // [vector k, 4 + k, 8 + k, 12 + k] of the group.
  __m512 e[2];
#pragma GCC unroll 16
  for (int i = 0; i < 2; ++i) {
    const __m512 a = u[2 * i], b = u[2 * i + 1];
    e[i] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 h =
      _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane 4k + m holds vector 4m + k.
  const __m512i order =
      _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, h);
}

template <int G, int C>
BRAID_AVX512 void ScoresT(const uint16_t* const* k_rows, int64_t n,
                          const float* const* q, bool gemm, float* scores,
                          int64_t ld) {
  __m512 qv[G][C];
#pragma GCC unroll 16
  for (int h = 0; h < G; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) qv[h][c] = _mm512_loadu_ps(q[h] + 16 * c);
  }
  alignas(64) __m512 part[G][16];
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int m = static_cast<int>(n - j0 < 16 ? n - j0 : 16);
    for (int jj = 0; jj < 16; ++jj) {
      if (jj >= m) {
#pragma GCC unroll 16
        for (int h = 0; h < G; ++h) part[h][jj] = _mm512_setzero_ps();
        continue;
      }
      __m512 kv[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) kv[c] = LoadF16x16(k_rows[j0 + jj] + 16 * c);
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) {
        if (gemm) {
          // One accumulator over the row (DotF16F32Gemm).
          __m512 acc = _mm512_fmadd_ps(kv[0], qv[h][0], _mm512_setzero_ps());
#pragma GCC unroll 16
          for (int c = 1; c < C; ++c) {
            acc = _mm512_fmadd_ps(kv[c], qv[h][c], acc);
          }
          part[h][jj] = acc;
        } else {
          // Four accumulators over steps of 64, pairwise (DotF16F32Vec).
          __m512 a[4];
#pragma GCC unroll 16
          for (int c = 0; c < 4; ++c) {
            a[c] = _mm512_fmadd_ps(kv[c], qv[h][c], _mm512_setzero_ps());
          }
#pragma GCC unroll 16
          for (int c = 4; c < C; ++c) {
            a[c % 4] = _mm512_fmadd_ps(kv[c], qv[h][c], a[c % 4]);
          }
          part[h][jj] = _mm512_add_ps(_mm512_add_ps(a[0], a[2]),
                                      _mm512_add_ps(a[1], a[3]));
        }
      }
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << m) - 1);
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) {
      _mm512_mask_storeu_ps(scores + h * ld + j0, mask,
                            ReduceAdd16x16(part[h]));
    }
  }
}

template <int G, int C>
BRAID_AVX512 void SlotSumsT(const uint16_t* const* v_rows, int64_t n,
                            const float* w, int64_t ldw, int64_t slots,
                            float* acc, int64_t ld_acc) {
  const int64_t used = n < slots ? n : slots;
  for (int64_t s = 0; s < used; ++s) {
    __m512 a[G][C];
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) a[h][c] = _mm512_setzero_ps();
    }
    for (int64_t j = s; j < n; j += slots) {
      __m512 vv[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) vv[c] = LoadF16x16(v_rows[j] + 16 * c);
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) {
        const __m512 p = _mm512_set1_ps(w[h * ldw + j]);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c)
          a[h][c] = _mm512_fmadd_ps(p, vv[c], a[h][c]);
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) {
      float* row = acc + h * ld_acc + s * (16 * C);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(row + 16 * c, a[h][c]);
    }
  }
}

struct ScoresBody {
  const uint16_t* const* k_rows;
  int64_t n;
  const float* const* q;
  bool gemm;
  float* scores;
  int64_t ld;
  template <int G, int C>
  void operator()() {
    ScoresT<G, C>(k_rows, n, q, gemm, scores, ld);
  }
};

struct SlotSumsBody {
  const uint16_t* const* v_rows;
  int64_t n;
  const float* w;
  int64_t ldw, slots;
  float* acc;
  int64_t ld_acc;
  template <int G, int C>
  void operator()() {
    SlotSumsT<G, C>(v_rows, n, w, ldw, slots, acc, ld_acc);
  }
};

// Calls fn.operator()<G, C>() with G = g (1..4).
template <int C, typename Fn>
void WithGroup(int g, Fn&& fn) {
  switch (g) {
    case 1:
      fn.template operator()<1, C>();
      break;
    case 2:
      fn.template operator()<2, C>();
      break;
    case 3:
      fn.template operator()<3, C>();
      break;
    default:
      fn.template operator()<4, C>();
      break;
  }
}

}  // namespace

bool ScoresF16Avx512(const uint16_t* const* k_rows, int64_t n,
                     const float* const* q, int g, int64_t head_dim, bool gemm,
                     float* scores, int64_t ld) {
  if (head_dim != 64 && head_dim != 128) return false;
  // Heads per pass: their query rows stay in registers.
  const int per_pass = head_dim == 64 ? 4 : 2;
  for (int h0 = 0; h0 < g; h0 += per_pass) {
    const int gs = g - h0 < per_pass ? g - h0 : per_pass;
    ScoresBody body{k_rows, n, q + h0, gemm, scores + h0 * ld, ld};
    if (head_dim == 64) {
      WithGroup<4>(gs, body);
    } else {
      WithGroup<8>(gs, body);
    }
  }
  return true;
}

bool SlotSumsF16Avx512(const uint16_t* const* v_rows, int64_t n, const float* w,
                       int64_t ldw, int g, int64_t head_dim, int64_t slots,
                       float* acc, int64_t ld_acc) {
  if (head_dim != 64 && head_dim != 128) return false;
  // Slot rows of at most 16 registers per pass.
  const int per_pass = head_dim == 64 ? 4 : 2;
  for (int h0 = 0; h0 < g; h0 += per_pass) {
    const int gs = g - h0 < per_pass ? g - h0 : per_pass;
    SlotSumsBody body{v_rows, n, w + h0 * ldw, ldw, slots, acc + h0 * ld_acc,
                      ld_acc};
    if (head_dim == 64) {
      WithGroup<4>(gs, body);
    } else {
      WithGroup<8>(gs, body);
    }
  }
  return true;
}

}  // namespace braid::kernels::cpu::internal
