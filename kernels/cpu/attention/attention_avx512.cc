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
// _mm512_undefined_* placeholders (GCC bug 105593), and -Wuninitialized in
// _mm512_reduce_max_ps.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention/attention_kernels.h"
#include "kernels/cpu/attention/attention_paged.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/vec_math.h"

#define BRAID_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace braid::kernels::cpu::internal {
namespace {

BRAID_AVX512 inline __m512 LoadF16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lanes [0, count) of 16 (none for count <= 0).
inline __mmask16 FirstLanes(int64_t count) {
  return count >= kLanes ? 0xFFFF
         : count <= 0    ? 0
                         : static_cast<__mmask16>((1u << count) - 1);
}

// Keys ahead whose rows are prefetched: the rows sit in scattered KV blocks
// and in a decode step come from memory (the weights' stream has evicted
// them since the last layer's turn). 32 keys with the first 32 fetched
// before the first score: batched decode steps 1-3% faster than 16 keys
// without (step-interleaved, 4 and 8 sequences), one stream unchanged.
constexpr int64_t kAhead = 32;

// Prefetches key j's K row (into L1) and V row (into L2, for the weighted
// sum that follows).
template <int C>
BRAID_AVX512 inline void PrefetchKey(const uint16_t* const* k_rows,
                                     const uint16_t* const* v_rows, int64_t j) {
  const char* kp = reinterpret_cast<const char*>(k_rows[j]);
  const char* vp = reinterpret_cast<const char*>(v_rows[j]);
#pragma GCC unroll 8
  for (int c = 0; c < C; c += 2) {
    PrefetchL1(kp + 32 * c);
    PrefetchL2(vp + 32 * c);
  }
}

template <int G, int C>
BRAID_AVX512 void ScoresT(const uint16_t* const* k_rows,
                          const uint16_t* const* v_rows, int64_t n,
                          const float* const* q, bool gemm, float* scores,
                          int64_t ld) {
  __m512 qv[G][C];
#pragma GCC unroll 16
  for (int h = 0; h < G; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) qv[h][c] = _mm512_loadu_ps(q[h] + 16 * c);
  }
  alignas(64) __m512 part[G][16];
  if (v_rows != nullptr) {
    for (int64_t j = 0; j < kAhead && j < n; ++j) {
      PrefetchKey<C>(k_rows, v_rows, j);
    }
  }
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int m = static_cast<int>(n - j0 < 16 ? n - j0 : 16);
    for (int jj = 0; jj < 16; ++jj) {
      if (jj >= m) {
#pragma GCC unroll 16
        for (int h = 0; h < G; ++h) part[h][jj] = _mm512_setzero_ps();
        continue;
      }
      if (v_rows != nullptr && j0 + jj + kAhead < n) {
        PrefetchKey<C>(k_rows, v_rows, j0 + jj + kAhead);
      }
      __m512 kv[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) kv[c] = LoadF16x16(k_rows[j0 + jj] + 16 * c);
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) {
        if (gemm) {
          // One accumulator over the row (DotF16F32Gemm; its first fma
          // onto +0 as a multiply, see below).
          __m512 acc = _mm512_mul_ps(kv[0], qv[h][0]);
#pragma GCC unroll 16
          for (int c = 1; c < C; ++c) {
            acc = _mm512_fmadd_ps(kv[c], qv[h][c], acc);
          }
          part[h][jj] = acc;
        } else {
          // Four accumulators over steps of 64, pairwise (DotF16F32Vec).
          // The first step's fma onto +0 is the product rounded once, as
          // a multiply gives it (save the sign of a zero product, which no
          // later sum, maximum or exp tells apart); the multiply keeps kv
          // for the next head without a copy.
          __m512 a[4];
#pragma GCC unroll 16
          for (int c = 0; c < 4; ++c) a[c] = _mm512_mul_ps(kv[c], qv[h][c]);
#pragma GCC unroll 16
          for (int c = 4; c < C; ++c) {
            a[c % 4] = _mm512_fmadd_ps(kv[c], qv[h][c], a[c % 4]);
          }
          part[h][jj] = _mm512_add_ps(_mm512_add_ps(a[0], a[2]),
                                      _mm512_add_ps(a[1], a[3]));
        }
      }
    }
    const __mmask16 mask = FirstLanes(m);
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) {
      _mm512_mask_storeu_ps(scores + h * ld + j0, mask,
                            ReduceAdd16x16(part[h]));
    }
  }
}

// Steps of ResidueT whose rows it fetches ahead.
constexpr int64_t kResidueAhead = 8;
// Heads a weighted-sum pass takes (SlotPasses): their slot accumulators, 8
// a head for 64 slots and 2 for 16, fit the registers.
constexpr int kHeadsPerPass64 = 3, kHeadsPerPass16 = 12;

// The weights of G heads by residue (ResidueWeights): residue r's keys j =
// r + 8i in order, each key's G weights together, so a pass over one
// residue reads its weights as one stream instead of a line of every
// head's score row for every key.
thread_local std::vector<float> residue_weights;

// Keys of residue r among n (j = r + 8i < n).
inline int64_t ResidueKeys(int64_t n, int r) {
  return n > r ? (n - r + 7) / 8 : 0;
}

// Residues [r0, r1) of the G heads' weights w[h * ldw + j] (j < n) into
// residue_weights: residue r's at (r - r0) * G * ResidueKeys(n, 0), key i's
// G weights at i * G of it. Returns the buffer.
template <int G>
BRAID_AVX512 const float* ResidueWeights(const float* w, int64_t ldw, int64_t n,
                                         int r0, int r1) {
  const int64_t per = G * ResidueKeys(n, 0);
  if (static_cast<int64_t>(residue_weights.size()) < (r1 - r0) * per) {
    residue_weights.resize((r1 - r0) * per);
  }
  float* out = residue_weights.data();
  for (int r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * per;
    const int64_t keys = ResidueKeys(n, r);
    for (int64_t i = 0; i < keys; ++i) {
      const int64_t j = r + 8 * i;
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) o[i * G + h] = w[h * ldw + j];
    }
  }
  return out;
}

// Residue r of the slots (slot = r + 8i, i < A = slots / 8), 16 dims at
// dim0: for every head, the slot sums over keys j = slot (mod slots) in j
// order, then combined as ReduceSlots' first levels combine them (slot
// s + 32 into s, s + 16 into s, s + 8 into s): ((a0 + a4) + (a2 + a6)) +
// ((a1 + a5) + (a3 + a7)) for 64 slots, a0 + a1 for 16. Unused slots stay
// +0, which adds nothing (no slot sum is -0: they start at +0). wr: the
// residue's weights (ResidueWeights).
template <int G, int A>
BRAID_AVX512 void ResidueT(const uint16_t* const* v_rows, int64_t n,
                           const float* wr, int r, int dim0, __m512* out) {
  __m512 a[A][G];
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i) {
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) a[i][h] = _mm512_setzero_ps();
  }
  const int64_t keys = ResidueKeys(n, r);
  for (int64_t i0 = 0; i0 < keys; i0 += A) {
    // The rows a few steps on into L1: they lie scattered over the KV
    // blocks, where no hardware prefetch finds them.
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) {
      const int64_t ahead = i0 + kResidueAhead * A + i;
      if (ahead < keys) PrefetchL1(v_rows[r + 8 * ahead] + dim0);
    }
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) {
      if (i0 + i >= keys) break;
      const __m512 vv = LoadF16x16(v_rows[r + 8 * (i0 + i)] + dim0);
      const float* wk = wr + (i0 + i) * G;
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) {
        a[i][h] = _mm512_fmadd_ps(_mm512_set1_ps(wk[h]), vv, a[i][h]);
      }
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < G; ++h) {
    if constexpr (A == 8) {
      out[h] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0][h], a[4][h]),
                                           _mm512_add_ps(a[2][h], a[6][h])),
                             _mm512_add_ps(_mm512_add_ps(a[1][h], a[5][h]),
                                           _mm512_add_ps(a[3][h], a[7][h])));
    } else {
      out[h] = _mm512_add_ps(a[0][h], a[1][h]);
    }
  }
}

// The weighted V sums of G heads, reduced in ReduceSlots' order, into
// out[h][0..16 * C).
template <int G, int A>
BRAID_AVX512 void WeightedSumT(const uint16_t* const* v_rows, int64_t n,
                               const float* w, int64_t ldw, int chunks,
                               float* const* out) {
  const float* wr = ResidueWeights<G>(w, ldw, n, 0, 8);
  const int64_t per = G * ResidueKeys(n, 0);
  for (int c = 0; c < chunks; ++c) {
    __m512 res[8][G];  // per residue r: the combined slot sums of each head
    for (int r = 0; r < 8; ++r) {
      ResidueT<G, A>(v_rows, n, wr + r * per, r, 16 * c, res[r]);
    }
    // Then ggml's lane tree over the residues: r += r + 4, 0 += 2, 1 += 3,
    // 0 += 1.
#pragma GCC unroll 16
    for (int h = 0; h < G; ++h) {
      const __m512 d0 = _mm512_add_ps(res[0][h], res[4][h]);
      const __m512 d1 = _mm512_add_ps(res[1][h], res[5][h]);
      const __m512 d2 = _mm512_add_ps(res[2][h], res[6][h]);
      const __m512 d3 = _mm512_add_ps(res[3][h], res[7][h]);
      _mm512_storeu_ps(out[h] + 16 * c, _mm512_add_ps(_mm512_add_ps(d0, d2),
                                                      _mm512_add_ps(d1, d3)));
    }
  }
}

struct ScoresBody {
  const uint16_t* const* k_rows;
  const uint16_t* const* v_rows;
  int64_t n;
  const float* const* q;
  bool gemm;
  float* scores;
  int64_t ld;
  template <int G, int C>
  void operator()() {
    ScoresT<G, C>(k_rows, v_rows, n, q, gemm, scores, ld);
  }
};

// The combined slot sums of residues [r0, r1) (ResidueT) for G heads, stored
// as res[h * 8 * dim + r * dim + i].
template <int G, int A>
BRAID_AVX512 void ResidueSumsT(const uint16_t* const* v_rows, int64_t n,
                               const float* w, int64_t ldw, int chunks, int r0,
                               int r1, float* res) {
  const int64_t dim = 16 * chunks;
  const float* wr = ResidueWeights<G>(w, ldw, n, r0, r1);
  const int64_t per = G * ResidueKeys(n, 0);
  for (int c = 0; c < chunks; ++c) {
    for (int r = r0; r < r1; ++r) {
      __m512 out[G];
      ResidueT<G, A>(v_rows, n, wr + (r - r0) * per, r, 16 * c, out);
#pragma GCC unroll 16
      for (int h = 0; h < G; ++h) {
        _mm512_storeu_ps(res + h * 8 * dim + r * dim + 16 * c, out[h]);
      }
    }
  }
}

struct ResidueSumsBody {
  const uint16_t* const* v_rows;
  int64_t n;
  const float* w;
  int64_t ldw;
  int chunks, r0, r1;
  float* res;
  template <int G, int A>
  void operator()() {
    ResidueSumsT<G, A>(v_rows, n, w, ldw, chunks, r0, r1, res);
  }
};

struct WeightedSumBody {
  const uint16_t* const* v_rows;
  int64_t n;
  const float* w;
  int64_t ldw;
  int chunks;
  float* const* out;
  template <int G, int A>
  void operator()() {
    WeightedSumT<G, A>(v_rows, n, w, ldw, chunks, out);
  }
};

// Calls fn.operator()<G, C>() with G = g (1..kMax).
template <int C, int kMax = 4, typename Fn>
void WithGroup(int g, Fn&& fn) {
  if constexpr (kMax > 1) {
    if (g < kMax) return WithGroup<C, kMax - 1>(g, fn);
  }
  fn.template operator()<kMax, C>();
}

}  // namespace

BRAID_AVX512 void SoftmaxRowAvx512(float* row, int64_t n, int64_t ld,
                                   float scale) {
  const int64_t n_pad = (n + kLanes - 1) / kLanes * kLanes;
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  __m512 m = neg_inf;
  // Lanes past n hold -inf: weight exactly 0 in the sum below.
  for (int64_t j = 0; j < n_pad; j += kLanes) {
    const __mmask16 k = FirstLanes(n - j);
    const __m512 v =
        _mm512_mask_mul_ps(neg_inf, k, _mm512_maskz_loadu_ps(k, row + j), s);
    _mm512_storeu_ps(row + j, v);
    m = _mm512_max_ps(m, v);
  }
  const double sum = ExpShiftedSum(row, _mm512_reduce_max_ps(m), row, n_pad);
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t j = 0; j < ld; j += kLanes) {
    const __mmask16 valid = FirstLanes(n - j);
    const __m512 w = _mm512_cvtph_ps(_mm512_cvtps_ph(
        _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, row + j), inv),
        _MM_FROUND_TO_NEAREST_INT));
    _mm512_mask_storeu_ps(row + j, FirstLanes(ld - j),
                          _mm512_maskz_mov_ps(valid, w));
  }
}

void ReserveResidueWeights(int64_t max_ctx) {
  // A pass's heads, every residue's keys (ResidueWeights).
  const int64_t need = kHeadsPerPass16 * 8 * ResidueKeys(max_ctx, 0);
  if (static_cast<int64_t>(residue_weights.size()) < need) {
    residue_weights.resize(need);
  }
}

bool ScoresF16Avx512(const uint16_t* const* k_rows,
                     const uint16_t* const* v_rows, int64_t n,
                     const float* const* q, int g, int64_t head_dim, bool gemm,
                     float* scores, int64_t ld) {
  if (head_dim != 64 && head_dim != 128) return false;
  // Heads per pass: their query rows stay in registers.
  const int per_pass = head_dim == 64 ? 4 : 2;
  for (int h0 = 0; h0 < g; h0 += per_pass) {
    const int gs = g - h0 < per_pass ? g - h0 : per_pass;
    // Only the first pass reads the rows from memory.
    ScoresBody body{k_rows, h0 == 0 ? v_rows : nullptr, n, q + h0,
                    gemm,   scores + h0 * ld,           ld};
    if (head_dim == 64) {
      WithGroup<4>(gs, body);
    } else {
      WithGroup<8>(gs, body);
    }
  }
  return true;
}

namespace {

// Runs make(h0) (a body for heads [h0, h0 + its group)) over the g heads in
// passes whose slot accumulators fit the registers (kHeadsPerPass64 /
// kHeadsPerPass16). Each pass reads the V rows again (a long context's from
// L2), so a pass takes as many heads as fit.
template <typename MakeBody>
bool SlotPasses(int g, int64_t head_dim, int64_t slots, MakeBody make) {
  if (head_dim % 16 != 0 || head_dim > 256 || (slots != 16 && slots != 64)) {
    return false;
  }
  const int per_pass = slots == 64 ? kHeadsPerPass64 : kHeadsPerPass16;
  for (int h0 = 0; h0 < g; h0 += per_pass) {
    const int gs = g - h0 < per_pass ? g - h0 : per_pass;
    auto body = make(h0);
    if (slots == 64) {
      WithGroup<8, kHeadsPerPass64>(gs, body);
    } else {
      WithGroup<2, kHeadsPerPass16>(gs, body);
    }
  }
  return true;
}

}  // namespace

bool WeightedSumF16Avx512(const uint16_t* const* v_rows, int64_t n,
                          const float* w, int64_t ldw, int g, int64_t head_dim,
                          int64_t slots, float* const* out) {
  const int chunks = static_cast<int>(head_dim / 16);
  return SlotPasses(g, head_dim, slots, [&](int h0) {
    return WeightedSumBody{v_rows, n, w + h0 * ldw, ldw, chunks, out + h0};
  });
}

bool ResidueSumsF16Avx512(const uint16_t* const* v_rows, int64_t n,
                          const float* w, int64_t ldw, int g, int64_t head_dim,
                          int64_t slots, int r0, int r1, float* res) {
  const int chunks = static_cast<int>(head_dim / 16);
  return SlotPasses(g, head_dim, slots, [&](int h0) {
    return ResidueSumsBody{v_rows, n,  w + h0 * ldw, ldw,
                           chunks, r0, r1,           res + h0 * 8 * head_dim};
  });
}

}  // namespace braid::kernels::cpu::internal
