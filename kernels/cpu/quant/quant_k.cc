// The 5-bit, IQ4_NL and K-quant formats: dequantizers, the Q8_K activation
// quantizer and the Q5_0 / Q5_1 reference quantizers (ggml's arithmetic), and
// plain round-to-nearest quantizers for the other types (tests and test
// models; ggml's quantizers search scales, these do not).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu {
namespace {

// Rounds half to even, as ggml's nearest_int does.
inline int NearestInt(float v) { return static_cast<int>(std::nearbyintf(v)); }

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The element of x with the largest magnitude (its sign kept); 0 if all are 0.
float SignedMaxAbs(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

namespace internal {

void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = (lo - 16) * d;
      y[j + kQK / 2] = (hi - 16) * d;
    }
  }
}

void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    const float m = Fp16ToFp32(x[i].m);
    const uint32_t qh = LoadU32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = lo * d + m;
      y[j + kQK / 2] = hi * d + m;
    }
  }
}

void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * kIq4NlValues[x[i].qs[j] & 0xF];
      y[j + kQK / 2] = d * kIq4NlValues[x[i].qs[j] >> 4];
    }
  }
}

// Q2_K: element e of a block is in 128-element half h = e / 128, at byte
// l = e % 32 of that half's 32 bytes, bits 2 * ((e % 128) / 32); sub-block
// e / 16 gives its scale (low nibble) and min (high nibble).
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    const float dmin = Fp16ToFp32(x[i].dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t sc = x[i].scales[e / 16];
      const int q =
          (x[i].qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      y[e] = d * (sc & 0xF) * q - dmin * (sc >> 4);
    }
  }
}

// Q3_K: the low 2 bits as Q2_K's; the third bit is bit (e / 32) of
// hmask[e % 32]; the value is that 3-bit number minus 4.
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const int low =
          (x[i].qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
      y[e] = d * ScaleQ3K(e / 16, x[i].scales) * (low + 4 * high - 4);
    }
  }
}

// Q4_K: element e is in 64-element group g = e / 64, byte e % 32 of the
// group's 32 bytes, low nibble for the group's first 32 elements, high for
// the next; sub-block e / 32 has a 6-bit scale and min (ScaleMinK4).
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    const float dmin = Fp16ToFp32(x[i].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      ScaleMinK4(s, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      const uint8_t* q = x[i].qs + (s / 2) * 32;
      for (int l = 0; l < 32; ++l) {
        const int v = s % 2 == 0 ? q[l] & 0xF : q[l] >> 4;
        y[s * 32 + l] = d1 * v - m1;
      }
    }
  }
}

// Q5_K: Q4_K's nibbles plus a fifth bit, bit s of qh[e % 32] for sub-block
// s = e / 32.
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    const float dmin = Fp16ToFp32(x[i].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      ScaleMinK4(s, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      const uint8_t* q = x[i].qs + (s / 2) * 32;
      for (int l = 0; l < 32; ++l) {
        const int v = (s % 2 == 0 ? q[l] & 0xF : q[l] >> 4) |
                      (((x[i].qh[l] >> s) & 1) << 4);
        y[s * 32 + l] = d1 * v - m1;
      }
    }
  }
}

// Q6_K: in 128-element half h, element l + 32 * k (l < 32, k < 4) takes
// nibble k / 2 of ql[h * 64 + l + 32 * (k % 2)] and bits 2k, 2k + 1 of
// qh[h * 32 + l]; the value minus 32 times sub-block e / 16's int8 scale.
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = Fp16ToFp32(x[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t ql = x[i].ql[h * 64 + l + 32 * (k % 2)];
      const int low = k < 2 ? ql & 0xF : ql >> 4;
      const int high = (x[i].qh[h * 32 + l] >> (2 * k)) & 3;
      y[e] = d * x[i].scales[e / 16] * ((low | (high << 4)) - 32);
    }
  }
}

void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    for (int e = 0; e < kQK_K; ++e) y[e] = x[i].d * x[i].qs[e];
  }
}

}  // namespace internal

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  if (UseAvx2()) return internal::QuantizeRowQ8_KAvx2(x, y, n);
  internal::QuantizeRowQ8_KScalar(x, y, n);
}

void internal::QuantizeRowQ8_KScalar(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float max = SignedMaxAbs(x, kQK_K);
    if (max == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int e = 0; e < kQK_K; ++e) {
      y[i].qs[e] =
          static_cast<int8_t>(std::min(127, NearestInt(iscale * x[e])));
    }
    for (int s = 0; s < kQK_K / 16; ++s) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += y[i].qs[s * 16 + e];
      y[i].bsums[s] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

namespace {

// Packs 32 5-bit values (q[j] < 32) into a 5-bit block's qs and qh.
void PackQ5(const int* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= ((q[j] >> 4) & 1u) << j;
    qh |= ((q[j + 16] >> 4) & 1u) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

}  // namespace

void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = SignedMaxAbs(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) {
      q[j] = std::min(31,
                      static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    }
    PackQ5(q, y[i].qs, y[i].qh);
  }
}

void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQK; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) {
      q[j] = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
    }
    PackQ5(q, y[i].qs, y[i].qh);
  }
}

namespace {

int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

void QuantizeIQ4_NL(const float* x, BlockIQ4_NL* y) {
  const float d = SignedMaxAbs(x, kQK) / kIq4NlValues[0];
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = Fp32ToFp16(d);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) {
    const float v = x[j] * id;
    int best = 0;
    for (int k = 1; k < 16; ++k) {
      if (std::fabs(v - kIq4NlValues[k]) < std::fabs(v - kIq4NlValues[best])) {
        best = k;
      }
    }
    q[j] = best;
  }
  for (int j = 0; j < kQK / 2; ++j) {
    y->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}

// Sub-block scales and mins for x ~ scale * q - min, q in [0, qmax]: per
// sub-block of `len` elements, min = max(0, -min(x)), scale = (max(x) + min)
// / qmax.
void ScalesMins(const float* x, int subs, int len, int qmax, float* scale,
                float* min) {
  for (int s = 0; s < subs; ++s) {
    float lo = x[s * len], hi = x[s * len];
    for (int j = 1; j < len; ++j) {
      lo = std::min(lo, x[s * len + j]);
      hi = std::max(hi, x[s * len + j]);
    }
    min[s] = std::max(0.0f, -lo);
    scale[s] = (hi + min[s]) / qmax;
  }
}

float MaxOf(const float* v, int n) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) m = std::max(m, v[j]);
  return m;
}

// The q in [0, qmax] nearest x for x ~ d * q - m.
int AffineQ(float x, float d, float m, int qmax) {
  return d != 0.0f ? Clamp(NearestInt((x + m) / d), 0, qmax) : 0;
}

// Q4_K (qbits 4) or Q5_K (5): 6-bit sub-block scales and mins.
template <typename Block>
void QuantizeQ45K(const float* x, Block* y, int qmax, int* q) {
  float scale[8], min[8];
  ScalesMins(x, 8, 32, qmax, scale, min);
  const float d = MaxOf(scale, 8) / 63.0f, dmin = MaxOf(min, 8) / 63.0f;
  y->d = Fp32ToFp16(d);
  y->dmin = Fp32ToFp16(dmin);
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d != 0.0f ? Clamp(NearestInt(scale[s] / d), 0, 63) : 0;
    mn[s] = dmin != 0.0f ? Clamp(NearestInt(min[s] / dmin), 0, 63) : 0;
  }
  for (int j = 0; j < 4; ++j) {
    y->scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    y->scales[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
    y->scales[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4);
  }
  const float df = Fp16ToFp32(y->d), dminf = Fp16ToFp32(y->dmin);
  for (int s = 0; s < 8; ++s) {
    uint8_t scq, mq;
    internal::ScaleMinK4(s, y->scales, &scq, &mq);
    for (int l = 0; l < 32; ++l) {
      q[s * 32 + l] = AffineQ(x[s * 32 + l], df * scq, dminf * mq, qmax);
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y) {
  int q[kQK_K];
  QuantizeQ45K(x, y, 15, q);
  for (int s = 0; s < 8; s += 2) {
    for (int l = 0; l < 32; ++l) {
      y->qs[(s / 2) * 32 + l] =
          static_cast<uint8_t>(q[s * 32 + l] | (q[(s + 1) * 32 + l] << 4));
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y) {
  int q[kQK_K];
  QuantizeQ45K(x, y, 31, q);
  std::memset(y->qh, 0, sizeof(y->qh));
  for (int s = 0; s < 8; s += 2) {
    for (int l = 0; l < 32; ++l) {
      const int a = q[s * 32 + l], b = q[(s + 1) * 32 + l];
      y->qs[(s / 2) * 32 + l] =
          static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
      y->qh[l] |= static_cast<uint8_t>(((a >> 4) << s) | ((b >> 4) << (s + 1)));
    }
  }
}

// Where Q2_K / Q3_K keep element e's low 2 bits.
void Put2Bits(uint8_t* qs, int e, int v) {
  qs[(e / 128) * 32 + e % 32] |=
      static_cast<uint8_t>(v << (2 * ((e % 128) / 32)));
}

void QuantizeQ2_K(const float* x, BlockQ2_K* y) {
  float scale[16], min[16];
  ScalesMins(x, 16, 16, 3, scale, min);
  const float d = MaxOf(scale, 16) / 15.0f, dmin = MaxOf(min, 16) / 15.0f;
  y->d = Fp32ToFp16(d);
  y->dmin = Fp32ToFp16(dmin);
  const float df = Fp16ToFp32(y->d), dminf = Fp16ToFp32(y->dmin);
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int s = 0; s < 16; ++s) {
    const int sc = d != 0.0f ? Clamp(NearestInt(scale[s] / d), 0, 15) : 0;
    const int mn = dmin != 0.0f ? Clamp(NearestInt(min[s] / dmin), 0, 15) : 0;
    y->scales[s] = static_cast<uint8_t>(sc | (mn << 4));
    for (int l = 0; l < 16; ++l) {
      const int e = s * 16 + l;
      Put2Bits(y->qs, e, AffineQ(x[e], df * sc, dminf * mn, 3));
    }
  }
}

void QuantizeQ3_K(const float* x, BlockQ3_K* y) {
  float scale[16];
  float amax = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = SignedMaxAbs(x + s * 16, 16) / -4.0f;
    amax = std::max(amax, std::fabs(scale[s]));
  }
  const float d = amax / 31.0f;
  y->d = Fp32ToFp16(d);
  const float df = Fp16ToFp32(y->d);
  int sc[16];
  for (int s = 0; s < 16; ++s) {
    sc[s] = d != 0.0f ? Clamp(NearestInt(scale[s] / d), -32, 31) : 0;
  }
  std::memset(y->scales, 0, sizeof(y->scales));
  for (int s = 0; s < 16; ++s) {
    const int v = sc[s] + 32;
    if (s < 8) {
      y->scales[s] |= v & 0xF;
    } else {
      y->scales[s - 8] |= (v & 0xF) << 4;
    }
    y->scales[8 + s % 4] |= ((v >> 4) & 3) << (2 * (s / 4));
  }
  std::memset(y->qs, 0, sizeof(y->qs));
  std::memset(y->hmask, 0, sizeof(y->hmask));
  for (int e = 0; e < kQK_K; ++e) {
    const float step = df * internal::ScaleQ3K(e / 16, y->scales);
    const int q = step != 0.0f ? Clamp(NearestInt(x[e] / step), -4, 3) : 0;
    Put2Bits(y->qs, e, (q + 4) & 3);
    y->hmask[e % 32] |= static_cast<uint8_t>(((q + 4) >> 2) << (e / 32));
  }
}

void QuantizeQ6_K(const float* x, BlockQ6_K* y) {
  float scale[16];
  float amax = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = SignedMaxAbs(x + s * 16, 16) / -32.0f;
    amax = std::max(amax, std::fabs(scale[s]));
  }
  const float d = amax / 127.0f;
  y->d = Fp32ToFp16(d);
  const float df = Fp16ToFp32(y->d);
  for (int s = 0; s < 16; ++s) {
    y->scales[s] = static_cast<int8_t>(
        d != 0.0f ? Clamp(NearestInt(scale[s] / d), -127, 127) : 0);
  }
  std::memset(y->ql, 0, sizeof(y->ql));
  std::memset(y->qh, 0, sizeof(y->qh));
  for (int e = 0; e < kQK_K; ++e) {
    const float step = df * y->scales[e / 16];
    const int q =
        (step != 0.0f ? Clamp(NearestInt(x[e] / step), -32, 31) : 0) + 32;
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    y->ql[h * 64 + l + 32 * (k % 2)] |=
        static_cast<uint8_t>((q & 0xF) << (k < 2 ? 0 : 4));
    y->qh[h * 32 + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
}

}  // namespace

void QuantizeRowSimple(DType type, const float* x, void* dst, int64_t n) {
  const int64_t block = DTypeBlockSize(type);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t bytes = DTypeBlockBytes(type);
  for (int64_t i = 0; i < n / block; ++i, x += block, out += bytes) {
    switch (type) {
      case DType::kIQ4_NL:
        QuantizeIQ4_NL(x, reinterpret_cast<BlockIQ4_NL*>(out));
        break;
      case DType::kQ2_K:
        QuantizeQ2_K(x, reinterpret_cast<BlockQ2_K*>(out));
        break;
      case DType::kQ3_K:
        QuantizeQ3_K(x, reinterpret_cast<BlockQ3_K*>(out));
        break;
      case DType::kQ4_K:
        QuantizeQ4_K(x, reinterpret_cast<BlockQ4_K*>(out));
        break;
      case DType::kQ5_K:
        QuantizeQ5_K(x, reinterpret_cast<BlockQ5_K*>(out));
        break;
      case DType::kQ6_K:
        QuantizeQ6_K(x, reinterpret_cast<BlockQ6_K*>(out));
        break;
      default:
        QuantizeRow(type, x, out, block);
        break;
    }
  }
}

}  // namespace braid::kernels::cpu
