// Portable scalar dot products (the reference path and the non-AVX2 fallback).
#include <cmath>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ggml_reduce.h"
#include "kernels/cpu/quant/dot.h"

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

namespace {

// dot.h's order for rows of floats: lane i % 16 of 16 accumulates element i
// (one fma each) for i < n - n % 8, the lanes are summed by ReduceAdd16, and
// the last n % 8 elements are added one fma each.
template <typename Load>
float DotFloatRow(Load w, const float* x, int64_t n) {
  float acc[16] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; ++i) {
    acc[i % 16] = std::fmaf(w(i), x[i], acc[i % 16]);
  }
  float sum = ReduceAdd16(acc);
  for (int64_t i = n8; i < n; ++i) sum = std::fmaf(w(i), x[i], sum);
  return sum;
}

}  // namespace

float DotF32F32Scalar(const float* w, const float* x, int64_t n) {
  return DotFloatRow([w](int64_t i) { return w[i]; }, x, n);
}

float DotF16F32Scalar(const uint16_t* w, const float* x, int64_t n) {
  return DotFloatRow([w](int64_t i) { return Fp16ToFp32(w[i]); }, x, n);
}

float DotBF16F32Scalar(const uint16_t* w, const float* x, int64_t n) {
  return DotFloatRow([w](int64_t i) { return Bf16ToFp32(w[i]); }, x, n);
}

void AxpyF16Scalar(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fmaf(a, Fp16ToFp32(x[i]), y[i]);
}

void AddF32Scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float DotF16F32VecScalar(const uint16_t* x, const float* y, int64_t n) {
  float acc[64] = {};  // 4 accumulators x 16 lanes
  const int64_t np = n - n % 64;
  for (int64_t i = 0; i < np; ++i) {
    acc[i % 64] = std::fmaf(Fp16ToFp32(x[i]), y[i], acc[i % 64]);
  }
  for (int l = 0; l < 16; ++l) {
    acc[l] += acc[l + 32];
    acc[l + 16] += acc[l + 48];
  }
  for (int l = 0; l < 16; ++l) acc[l] += acc[l + 16];
  double sum = ReduceAdd16(acc);
  for (int64_t i = np; i < n; ++i) sum += Fp16ToFp32(x[i]) * y[i];
  return static_cast<float>(sum);
}

float DotF16F32GemmScalar(const uint16_t* x, const float* y, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    acc[i % 16] = std::fmaf(Fp16ToFp32(x[i]), y[i], acc[i % 16]);
  }
  return ReduceAdd16(acc);
}

}  // namespace braid::kernels::cpu::internal
