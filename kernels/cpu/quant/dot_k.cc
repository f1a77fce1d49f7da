// Dots of the 5-bit, IQ4_NL and K-quant weight types: the scalar path and the
// run-time choice between it and the AVX2 path (dot_k_avx2.cc).
//
// A K-quant block's dot is computed in integers: isum = the sum over its
// sub-blocks of scale * sum(q * q8) (the weight quants as unsigned values,
// Q3_K's and Q6_K's offsets -4 and -32 applied through Q8_K's bsums), msum =
// the sum of mins * bsums where the type has mins; then KQuantAccumulate
// (dot.h). Both paths compute the same integers and the same float steps.
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant/dot.h"

namespace braid::kernels::cpu {

namespace internal {
namespace {

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 32 5-bit values of a Q5_0 / Q5_1 block.
template <typename Block>
void Q5Values(const Block& b, int* q) {
  const uint32_t qh = LoadU32(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (b.qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    q[j + 16] = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
  }
}

// Q2_K / Q3_K: element e's low 2 bits.
inline int Low2(const uint8_t* qs, int e) {
  return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

}  // namespace

float DotQ5_0Q8_0Scalar(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int q[kQK];
    Q5Values(w[i], q);
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += (q[j] - 16) * x[i].qs[j];
    // One rounding for the block's term and the sum (the octet tiles' fma).
    sum = std::fma(static_cast<float>(isum),
                   Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d), sum);
  }
  return sum;
}

float DotQ5_1Q8_1Scalar(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int q[kQK];
    Q5Values(w[i], q);
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * x[i].qs[j];
    sum += isum * Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d) +
           Fp16ToFp32(w[i].m) * Fp16ToFp32(x[i].s);
  }
  return sum;
}

float DotIQ4_NLQ8_0Scalar(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += kIq4NlValues[w[i].qs[j] & 0xF] * x[i].qs[j];
      isum += kIq4NlValues[w[i].qs[j] >> 4] * x[i].qs[j + 16];
    }
    sum += isum * Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d);
  }
  return sum;
}

float DotQ2_KQ8_KScalar(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, msum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = s * 16; e < s * 16 + 16; ++e) {
        dot += Low2(w[i].qs, e) * x[i].qs[e];
      }
      isum += (w[i].scales[s] & 0xF) * dot;
      msum += (w[i].scales[s] >> 4) * x[i].bsums[s];
    }
    sum = KQuantAccumulate(sum, Fp16ToFp32(w[i].d) * x[i].d,
                           Fp16ToFp32(w[i].dmin) * x[i].d, isum, msum);
  }
  return sum;
}

float DotQ3_KQ8_KScalar(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = s * 16; e < s * 16 + 16; ++e) {
        const int u =
            Low2(w[i].qs, e) | (((w[i].hmask[e % 32] >> (e / 32)) & 1) << 2);
        dot += u * x[i].qs[e];
      }
      isum += ScaleQ3K(s, w[i].scales) * (dot - 4 * x[i].bsums[s]);
    }
    sum = KQuantAccumulate(sum, Fp16ToFp32(w[i].d) * x[i].d, 0.0f, isum, 0);
  }
  return sum;
}

namespace {

// Q4_K and Q5_K: sub-block s's unsigned values are value(s, l), l < 32.
template <typename Block, typename Value>
float DotQ45K(const Block* w, const BlockQ8_K* x, int64_t n, Value value) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      ScaleMinK4(s, w[i].scales, &sc, &m);
      int dot = 0;
      for (int l = 0; l < 32; ++l)
        dot += value(w[i], s, l) * x[i].qs[s * 32 + l];
      isum += sc * dot;
      msum += m * (x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
    }
    sum = KQuantAccumulate(sum, Fp16ToFp32(w[i].d) * x[i].d,
                           Fp16ToFp32(w[i].dmin) * x[i].d, isum, msum);
  }
  return sum;
}

}  // namespace

float DotQ4_KQ8_KScalar(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n) {
  return DotQ45K(w, x, n, [](const BlockQ4_K& b, int s, int l) {
    const uint8_t q = b.qs[(s / 2) * 32 + l];
    return s % 2 == 0 ? q & 0xF : q >> 4;
  });
}

float DotQ5_KQ8_KScalar(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n) {
  return DotQ45K(w, x, n, [](const BlockQ5_K& b, int s, int l) {
    const uint8_t q = b.qs[(s / 2) * 32 + l];
    return (s % 2 == 0 ? q & 0xF : q >> 4) | (((b.qh[l] >> s) & 1) << 4);
  });
}

float DotQ6_KQ8_KScalar(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = s * 16; e < s * 16 + 16; ++e) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t ql = w[i].ql[h * 64 + l + 32 * (k % 2)];
        const int u = (k < 2 ? ql & 0xF : ql >> 4) |
                      (((w[i].qh[h * 32 + l] >> (2 * k)) & 3) << 4);
        dot += u * x[i].qs[e];
      }
      isum += w[i].scales[s] * (dot - 32 * x[i].bsums[s]);
    }
    sum = KQuantAccumulate(sum, Fp16ToFp32(w[i].d) * x[i].d, 0.0f, isum, 0);
  }
  return sum;
}

}  // namespace internal

#define BRAID_DISPATCH(Name, W, X)                      \
  float Name(const W* w, const X* x, int64_t n) {       \
    return UseAvx2() ? internal::Name##Avx2(w, x, n)    \
                     : internal::Name##Scalar(w, x, n); \
  }
BRAID_DISPATCH(DotQ5_0Q8_0, BlockQ5_0, BlockQ8_0)
BRAID_DISPATCH(DotQ5_1Q8_1, BlockQ5_1, BlockQ8_1)
BRAID_DISPATCH(DotIQ4_NLQ8_0, BlockIQ4_NL, BlockQ8_0)
BRAID_DISPATCH(DotQ2_KQ8_K, BlockQ2_K, BlockQ8_K)
BRAID_DISPATCH(DotQ3_KQ8_K, BlockQ3_K, BlockQ8_K)
BRAID_DISPATCH(DotQ4_KQ8_K, BlockQ4_K, BlockQ8_K)
BRAID_DISPATCH(DotQ5_KQ8_K, BlockQ5_K, BlockQ8_K)
BRAID_DISPATCH(DotQ6_KQ8_K, BlockQ6_K, BlockQ8_K)
#undef BRAID_DISPATCH

}  // namespace braid::kernels::cpu
