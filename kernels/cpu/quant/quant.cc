#include "kernels/cpu/quant/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu {

bool IsKnownDType(uint32_t raw) {
  switch (static_cast<DType>(raw)) {
    case DType::kF32:
    case DType::kF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ8_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kBF16:
      return true;
  }
  return false;
}

bool IsKQuant(DType type) {
  switch (type) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

const char* DTypeName(DType type) {
  switch (type) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_1:
      return "Q4_1";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kQ8_1:
      return "Q8_1";
    case DType::kBF16:
      return "BF16";
    case DType::kQ5_0:
      return "Q5_0";
    case DType::kQ5_1:
      return "Q5_1";
    case DType::kIQ4_NL:
      return "IQ4_NL";
    case DType::kQ2_K:
      return "Q2_K";
    case DType::kQ3_K:
      return "Q3_K";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ5_K:
      return "Q5_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kQ8_K:
      return "Q8_K";
  }
  return "unknown";
}

int64_t DTypeBlockSize(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      return kQK_K;
    default:
      return kQK;
  }
}

int64_t DTypeBlockBytes(DType type) {
  switch (type) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ4_0:
      return sizeof(BlockQ4_0);
    case DType::kQ4_1:
      return sizeof(BlockQ4_1);
    case DType::kQ8_0:
      return sizeof(BlockQ8_0);
    case DType::kQ8_1:
      return sizeof(BlockQ8_1);
    case DType::kQ5_0:
      return sizeof(BlockQ5_0);
    case DType::kQ5_1:
      return sizeof(BlockQ5_1);
    case DType::kIQ4_NL:
      return sizeof(BlockIQ4_NL);
    case DType::kQ2_K:
      return sizeof(BlockQ2_K);
    case DType::kQ3_K:
      return sizeof(BlockQ3_K);
    case DType::kQ4_K:
      return sizeof(BlockQ4_K);
    case DType::kQ5_K:
      return sizeof(BlockQ5_K);
    case DType::kQ6_K:
      return sizeof(BlockQ6_K);
    case DType::kQ8_K:
      return sizeof(BlockQ8_K);
  }
  return 0;
}

size_t DTypeRowBytes(DType type, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockSize(type) * DTypeBlockBytes(type));
}

DType ActivationDType(DType weight_type) {
  switch (weight_type) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kIQ4_NL:
    case DType::kQ8_0:
      return DType::kQ8_0;
    case DType::kQ4_1:
    case DType::kQ5_1:
      return DType::kQ8_1;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return DType::kQ8_K;
    default:
      return DType::kF32;
  }
}

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / kQK;
  switch (type) {
    case DType::kQ5_0:
      return internal::DequantizeRowQ5_0(static_cast<const BlockQ5_0*>(src),
                                         dst, n);
    case DType::kQ5_1:
      return internal::DequantizeRowQ5_1(static_cast<const BlockQ5_1*>(src),
                                         dst, n);
    case DType::kIQ4_NL:
      return internal::DequantizeRowIQ4_NL(static_cast<const BlockIQ4_NL*>(src),
                                           dst, n);
    case DType::kQ2_K:
      return internal::DequantizeRowQ2_K(static_cast<const BlockQ2_K*>(src),
                                         dst, n);
    case DType::kQ3_K:
      return internal::DequantizeRowQ3_K(static_cast<const BlockQ3_K*>(src),
                                         dst, n);
    case DType::kQ4_K:
      return internal::DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(src),
                                         dst, n);
    case DType::kQ5_K:
      return internal::DequantizeRowQ5_K(static_cast<const BlockQ5_K*>(src),
                                         dst, n);
    case DType::kQ6_K:
      return internal::DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(src),
                                         dst, n);
    case DType::kQ8_K:
      return internal::DequantizeRowQ8_K(static_cast<const BlockQ8_K*>(src),
                                         dst, n);
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      Fp16ToFp32Row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kBF16:
      Bf16ToFp32Row(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
          dst[i * kQK + j] = ((b[i].qs[j] & 0x0F) - 8) * d;
          dst[i * kQK + j + kQK / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        const float m = Fp16ToFp32(b[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
          dst[i * kQK + j] = (b[i].qs[j] & 0x0F) * d + m;
          dst[i * kQK + j + kQK / 2] = (b[i].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = b[i].qs[j] * d;
      }
      return;
    }
    case DType::kQ8_1: {
      const auto* b = static_cast<const BlockQ8_1*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = b[i].qs[j] * d;
      }
      return;
    }
  }
}

namespace {

// Scale and inverse scale of a 32-element block, as ggml's AVX2 quantizer
// computes them (id = 127 / amax rather than 1 / d).
inline void Q8Scale(const float* x, float* d, float* id) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  *d = amax / 127.0f;
  *id = amax != 0.0f ? 127.0f / amax : 0.0f;
}

}  // namespace

void internal::QuantizeRowQ8_0Scalar(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK;
    float d, id;
    Q8Scale(xb, &d, &id);
    y[i].d = Fp32ToFp16(d);
    // nearbyintf rounds half to even, as _mm256_round_ps(_MM_ROUND_NEAREST)
    // does.
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::nearbyintf(xb[j] * id));
    }
  }
}

void internal::QuantizeRowQ8_1Scalar(const float* x, BlockQ8_1* y, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK;
    float d, id;
    Q8Scale(xb, &d, &id);
    y[i].d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int q = static_cast<int>(std::nearbyintf(xb[j] * id));
      y[i].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
  }
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  if (UseAvx2()) return internal::QuantizeRowQ8_0Avx2(x, y, n);
  internal::QuantizeRowQ8_0Scalar(x, y, n);
}

void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n) {
  if (UseAvx2()) return internal::QuantizeRowQ8_1Avx2(x, y, n);
  internal::QuantizeRowQ8_1Scalar(x, y, n);
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(xb[j] * id + 8.5f));
      const int q1 =
          std::min(15, static_cast<int>(xb[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK;
    float min = xb[0], max = xb[0];
    for (int j = 1; j < kQK; ++j) {
      min = std::min(min, xb[j]);
      max = std::max(max, xb[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((xb[j] - min) * id + 0.5f));
      const int q1 =
          std::min(15, static_cast<int>((xb[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRow(DType type, const float* x, void* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, x, n * sizeof(float));
      return;
    case DType::kF16:
      Fp32ToFp16Row(x, static_cast<uint16_t*>(dst), n);
      return;
    case DType::kBF16:
      Fp32ToBf16Row(x, static_cast<uint16_t*>(dst), n);
      return;
    case DType::kQ4_0:
      return QuantizeRowQ4_0(x, static_cast<BlockQ4_0*>(dst), n);
    case DType::kQ4_1:
      return QuantizeRowQ4_1(x, static_cast<BlockQ4_1*>(dst), n);
    case DType::kQ8_0:
      return QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(dst), n);
    case DType::kQ8_1:
      return QuantizeRowQ8_1(x, static_cast<BlockQ8_1*>(dst), n);
    case DType::kQ8_K:
      return QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(dst), n);
    case DType::kQ5_0:
      return QuantizeRowQ5_0(x, static_cast<BlockQ5_0*>(dst), n);
    case DType::kQ5_1:
      return QuantizeRowQ5_1(x, static_cast<BlockQ5_1*>(dst), n);
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return QuantizeRowSimple(type, x, dst, n);
  }
}

}  // namespace braid::kernels::cpu
