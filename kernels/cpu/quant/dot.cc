#include "kernels/cpu/quant/dot.h"

#include "kernels/cpu/cpu_features.h"

namespace braid::kernels::cpu {

float DotQ4_0Q8_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  return UseAvx2() ? internal::DotQ4_0Q8_0Avx2(w, x, n)
                   : internal::DotQ4_0Q8_0Scalar(w, x, n);
}
float DotQ4_1Q8_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n) {
  return UseAvx2() ? internal::DotQ4_1Q8_1Avx2(w, x, n)
                   : internal::DotQ4_1Q8_1Scalar(w, x, n);
}
float DotQ8_0Q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  return UseAvx2() ? internal::DotQ8_0Q8_0Avx2(w, x, n)
                   : internal::DotQ8_0Q8_0Scalar(w, x, n);
}
float DotF32F32(const float* w, const float* x, int64_t n) {
  return UseAvx2() ? internal::DotF32F32Avx2(w, x, n)
                   : internal::DotF32F32Scalar(w, x, n);
}
float DotF16F32(const uint16_t* w, const float* x, int64_t n) {
  return UseAvx2() ? internal::DotF16F32Avx2(w, x, n)
                   : internal::DotF16F32Scalar(w, x, n);
}
float DotBF16F32(const uint16_t* w, const float* x, int64_t n) {
  return UseAvx2() ? internal::DotBF16F32Avx2(w, x, n)
                   : internal::DotBF16F32Scalar(w, x, n);
}
float DotF16F32Vec(const uint16_t* x, const float* y, int64_t n) {
  return UseAvx2() ? internal::DotF16F32VecAvx2(x, y, n)
                   : internal::DotF16F32VecScalar(x, y, n);
}
float DotF16F32Gemm(const uint16_t* x, const float* y, int64_t n) {
  return UseAvx2() ? internal::DotF16F32GemmAvx2(x, y, n)
                   : internal::DotF16F32GemmScalar(x, y, n);
}
void DotF16F32VecRows(const uint16_t* const* xs, int64_t count, const float* y,
                      int64_t n, float* out) {
  if (UseAvx512()) {
    return internal::DotF16F32VecRowsAvx512(xs, count, y, n, out);
  }
  if (UseAvx2()) return internal::DotF16F32VecRowsAvx2(xs, count, y, n, out);
  for (int64_t r = 0; r < count; ++r) {
    out[r] = internal::DotF16F32VecScalar(xs[r], y, n);
  }
}
void DotF16F32GemmRows(const uint16_t* const* xs, int64_t count, const float* y,
                       int64_t n, float* out) {
  if (UseAvx512()) {
    return internal::DotF16F32GemmRowsAvx512(xs, count, y, n, out);
  }
  if (UseAvx2()) return internal::DotF16F32GemmRowsAvx2(xs, count, y, n, out);
  for (int64_t r = 0; r < count; ++r) {
    out[r] = internal::DotF16F32GemmScalar(xs[r], y, n);
  }
}
void AxpyF16Rows(const float* a, const uint16_t* const* xs, float* const* ys,
                 int64_t count, int64_t n) {
  if (UseAvx512()) return internal::AxpyF16RowsAvx512(a, xs, ys, count, n);
  if (UseAvx2()) return internal::AxpyF16RowsAvx2(a, xs, ys, count, n);
  for (int64_t r = 0; r < count; ++r) {
    internal::AxpyF16Scalar(a[r], xs[r], ys[r], n);
  }
}
void AxpyF16(float a, const uint16_t* x, float* y, int64_t n) {
  if (UseAvx2()) return internal::AxpyF16Avx2(a, x, y, n);
  internal::AxpyF16Scalar(a, x, y, n);
}
void Scale(float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

void AddF32(const float* x, float* y, int64_t n) {
  if (UseAvx512()) return internal::AddF32Avx512(x, y, n);
  if (UseAvx2()) return internal::AddF32Avx2(x, y, n);
  internal::AddF32Scalar(x, y, n);
}

float DotRow(DType weight_type, const void* w, const void* x, int64_t n) {
  switch (weight_type) {
    case DType::kQ4_0:
      return DotQ4_0Q8_0(static_cast<const BlockQ4_0*>(w),
                         static_cast<const BlockQ8_0*>(x), n);
    case DType::kQ4_1:
      return DotQ4_1Q8_1(static_cast<const BlockQ4_1*>(w),
                         static_cast<const BlockQ8_1*>(x), n);
    case DType::kQ8_0:
      return DotQ8_0Q8_0(static_cast<const BlockQ8_0*>(w),
                         static_cast<const BlockQ8_0*>(x), n);
    case DType::kF32:
      return DotF32F32(static_cast<const float*>(w),
                       static_cast<const float*>(x), n);
    case DType::kF16:
      return DotF16F32(static_cast<const uint16_t*>(w),
                       static_cast<const float*>(x), n);
    case DType::kBF16:
      return DotBF16F32(static_cast<const uint16_t*>(w),
                        static_cast<const float*>(x), n);
    case DType::kQ5_0:
      return DotQ5_0Q8_0(static_cast<const BlockQ5_0*>(w),
                         static_cast<const BlockQ8_0*>(x), n);
    case DType::kQ5_1:
      return DotQ5_1Q8_1(static_cast<const BlockQ5_1*>(w),
                         static_cast<const BlockQ8_1*>(x), n);
    case DType::kIQ4_NL:
      return DotIQ4_NLQ8_0(static_cast<const BlockIQ4_NL*>(w),
                           static_cast<const BlockQ8_0*>(x), n);
    case DType::kQ2_K:
      return DotQ2_KQ8_K(static_cast<const BlockQ2_K*>(w),
                         static_cast<const BlockQ8_K*>(x), n);
    case DType::kQ3_K:
      return DotQ3_KQ8_K(static_cast<const BlockQ3_K*>(w),
                         static_cast<const BlockQ8_K*>(x), n);
    case DType::kQ4_K:
      return DotQ4_KQ8_K(static_cast<const BlockQ4_K*>(w),
                         static_cast<const BlockQ8_K*>(x), n);
    case DType::kQ5_K:
      return DotQ5_KQ8_K(static_cast<const BlockQ5_K*>(w),
                         static_cast<const BlockQ8_K*>(x), n);
    case DType::kQ6_K:
      return DotQ6_KQ8_K(static_cast<const BlockQ6_K*>(w),
                         static_cast<const BlockQ8_K*>(x), n);
    case DType::kQ8_1:
    case DType::kQ8_K:
      break;  // Not weight types.
  }
  return 0.0f;
}

}  // namespace braid::kernels::cpu
