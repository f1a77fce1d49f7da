// Portable scalar dot products (the reference path and the non-AVX2 fallback).
#include "kernels/cpu/dot.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu::internal {

float DotQ4_0Q8_0Scalar(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += ((w[i].qs[j] & 0x0F) - 8) * x[i].qs[j];
      isum += ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + kQK / 2];
    }
    sum += isum * Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d);
  }
  return sum;
}

float DotQ4_1Q8_1Scalar(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += (w[i].qs[j] & 0x0F) * x[i].qs[j];
      isum += (w[i].qs[j] >> 4) * x[i].qs[j + kQK / 2];
    }
    sum += isum * Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d) +
           Fp16ToFp32(w[i].m) * Fp16ToFp32(x[i].s);
  }
  return sum;
}

float DotQ8_0Q8_0Scalar(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += w[i].qs[j] * x[i].qs[j];
    sum += isum * Fp16ToFp32(w[i].d) * Fp16ToFp32(x[i].d);
  }
  return sum;
}

float DotF32F32Scalar(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float DotF16F32Scalar(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += Fp16ToFp32(w[i]) * x[i];
  return sum;
}

float DotBF16F32Scalar(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += Bf16ToFp32(w[i]) * x[i];
  return sum;
}

void AxpyF16Scalar(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * Fp16ToFp32(x[i]);
}

}  // namespace braid::kernels::cpu::internal
