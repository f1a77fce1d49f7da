// IEEE half (fp16) and bfloat16 <-> float conversion.
//
// Scalar conversions are portable bit manipulation (inline, used for block
// scales inside dot products). Row conversions use F16C when the CPU has it.
// All functions are pure and thread-safe.
#ifndef BRAID_KERNELS_CPU_FP16_H_
#define BRAID_KERNELS_CPU_FP16_H_

#include <cstdint>
#include <cstring>

namespace braid::kernels::cpu {

namespace internal {
inline float FloatFromBits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof(f));
  return f;
}
inline uint32_t BitsFromFloat(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof(w));
  return w;
}
}  // namespace internal

// fp16 -> f32, exact (same algorithm as ggml's ggml_compute_fp16_to_fp32
// fallback).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  constexpr uint32_t kExpOffset = 0xE0u << 23;
  const float exp_scale = internal::FloatFromBits(0x7800000u);  // 2^-112
  const float normalized =
      internal::FloatFromBits((two_w >> 4) + kExpOffset) * exp_scale;
  constexpr uint32_t kMagicMask = 126u << 23;
  constexpr float kMagicBias = 0.5f;
  const float denormalized =
      internal::FloatFromBits((two_w >> 17) | kMagicMask) - kMagicBias;
  constexpr uint32_t kDenormCutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < kDenormCutoff ? internal::BitsFromFloat(denormalized)
                                    : internal::BitsFromFloat(normalized));
  return internal::FloatFromBits(result);
}

// f32 -> fp16, round to nearest even; overflow -> inf, NaN stays NaN.
inline uint16_t Fp32ToFp16(float f) {
  const float scale_to_inf = internal::FloatFromBits(0x77800000u);   // 2^112
  const float scale_to_zero = internal::FloatFromBits(0x08800000u);  // 2^-110
  float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
  const uint32_t w = internal::BitsFromFloat(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = internal::FloatFromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = internal::BitsFromFloat(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float Bf16ToFp32(uint16_t h) {
  return internal::FloatFromBits(static_cast<uint32_t>(h) << 16);
}

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t Fp32ToBf16(float f) {
  const uint32_t w = internal::BitsFromFloat(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((w >> 16) | 64);
  }
  return static_cast<uint16_t>((w + (0x7FFFu + ((w >> 16) & 1))) >> 16);
}

// Row conversions: y[i] = convert(x[i]) for i in [0, n).
void Fp16ToFp32Row(const uint16_t* x, float* y, int64_t n);
void Fp32ToFp16Row(const float* x, uint16_t* y, int64_t n);
void Bf16ToFp32Row(const uint16_t* x, float* y, int64_t n);
void Fp32ToBf16Row(const float* x, uint16_t* y, int64_t n);
// y[i] = Fp16ToFp32(Fp32ToFp16(x[i])): x rounded to the nearest fp16 value.
// y may alias x.
void RoundToFp16Row(const float* x, float* y, int64_t n);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_FP16_H_
