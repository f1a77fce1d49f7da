// GGUF weight blocks decoded to float, on the host and on the device.
//
// The same inline functions serve the CUDA dequantization kernel
// (kernels/cuda/dequant.cu) and host code, so the host test
// (dequant_blocks_test.cc) can check them bit for bit against kernels/cpu's
// DequantizeRow, the oracle. Header only; compiles with the host compiler
// and with nvcc (no CUDA or absl headers; the block layouts and type ids are
// kernels/cpu/quant/quant.h's, which is plain C++).
//
// Design: the unit of work is a group of kGroupElements (8) consecutive
// elements of a row, what one GPU thread turns into one 16-byte store of 8
// bf16 values. Every block format here has blocks of a multiple of 8
// elements, and the 8 elements of a group share their block's scales
// (sub-blocks have 16 or 32 elements), so a group's scales are decoded once.
// A warp thus covers one 256-element K-quant super-block, or eight 32-element
// blocks.
//
// Bit equality with the CPU: each value is computed with kernels/cpu's
// operations in its order. Every product here is exact in float (an fp16
// scale has 11 significant bits; times a sub-block scale and a quant, at most
// 11 + 7 + 5 = 23 bits, Q6_K's worst case), so the only rounding is the one
// add or subtract of the affine types (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), and
// whether a compiler fuses it with the product into an FMA (GCC does for the
// CPU build at -O2 with -mfma, nvcc does by default) cannot change a bit.
// The fp16 and bf16 conversions are integer-only, so NaN payloads come out
// the same on both sides too.
//
// All functions are pure and thread-safe. Block pointers must be aligned to
// 2 bytes (the fp16 fields), F32 data to 4; GGUF aligns tensor data to 32.
#ifndef BRAID_KERNELS_CUDA_DEQUANT_BLOCKS_H_
#define BRAID_KERNELS_CUDA_DEQUANT_BLOCKS_H_

#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant/quant.h"
#include "kernels/cuda/host_device.h"

namespace braid::kernels::cuda {

// Tensor type ids as the kernels take them: kernels/cpu's DType (ggml's
// ggml_type values).
inline constexpr uint32_t kTypeF32 = static_cast<uint32_t>(cpu::DType::kF32);
inline constexpr uint32_t kTypeF16 = static_cast<uint32_t>(cpu::DType::kF16);
inline constexpr uint32_t kTypeQ4_0 = static_cast<uint32_t>(cpu::DType::kQ4_0);
inline constexpr uint32_t kTypeQ4_1 = static_cast<uint32_t>(cpu::DType::kQ4_1);
inline constexpr uint32_t kTypeQ5_0 = static_cast<uint32_t>(cpu::DType::kQ5_0);
inline constexpr uint32_t kTypeQ5_1 = static_cast<uint32_t>(cpu::DType::kQ5_1);
inline constexpr uint32_t kTypeQ8_0 = static_cast<uint32_t>(cpu::DType::kQ8_0);
inline constexpr uint32_t kTypeQ2_K = static_cast<uint32_t>(cpu::DType::kQ2_K);
inline constexpr uint32_t kTypeQ3_K = static_cast<uint32_t>(cpu::DType::kQ3_K);
inline constexpr uint32_t kTypeQ4_K = static_cast<uint32_t>(cpu::DType::kQ4_K);
inline constexpr uint32_t kTypeQ5_K = static_cast<uint32_t>(cpu::DType::kQ5_K);
inline constexpr uint32_t kTypeQ6_K = static_cast<uint32_t>(cpu::DType::kQ6_K);
inline constexpr uint32_t kTypeIQ4_NL =
    static_cast<uint32_t>(cpu::DType::kIQ4_NL);
inline constexpr uint32_t kTypeBF16 = static_cast<uint32_t>(cpu::DType::kBF16);

// Consecutive elements one Decode call produces (one thread's 16-byte store).
inline constexpr int kGroupElements = 8;

// Block layouts: kernels/cpu's, byte for byte ggml's.
using cpu::BlockIQ4_NL;
using cpu::BlockQ2_K;
using cpu::BlockQ3_K;
using cpu::BlockQ4_0;
using cpu::BlockQ4_1;
using cpu::BlockQ4_K;
using cpu::BlockQ5_0;
using cpu::BlockQ5_1;
using cpu::BlockQ5_K;
using cpu::BlockQ6_K;
using cpu::BlockQ8_0;
using cpu::kQK;
using cpu::kQK_K;
static_assert(sizeof(BlockQ4_0) == 18, "ggml layout");
static_assert(sizeof(BlockQ4_1) == 20, "ggml layout");
static_assert(sizeof(BlockQ5_0) == 22, "ggml layout");
static_assert(sizeof(BlockQ5_1) == 24, "ggml layout");
static_assert(sizeof(BlockQ8_0) == 34, "ggml layout");
static_assert(sizeof(BlockIQ4_NL) == 18, "ggml layout");
static_assert(sizeof(BlockQ2_K) == 84, "ggml layout");
static_assert(sizeof(BlockQ3_K) == 110, "ggml layout");
static_assert(sizeof(BlockQ4_K) == 144, "ggml layout");
static_assert(sizeof(BlockQ5_K) == 176, "ggml layout");
static_assert(sizeof(BlockQ6_K) == 210, "ggml layout");

// Elements per block of `type` (1 for F32, F16, BF16); 0 for a type this
// header does not decode (Q8_1 and Q8_K, activation types, and unknown ids).
BRAID_HD int BlockElements(uint32_t type) {
  switch (type) {
    case kTypeF32:
    case kTypeF16:
    case kTypeBF16:
      return 1;
    case kTypeQ4_0:
    case kTypeQ4_1:
    case kTypeQ5_0:
    case kTypeQ5_1:
    case kTypeQ8_0:
    case kTypeIQ4_NL:
      return kQK;
    case kTypeQ2_K:
    case kTypeQ3_K:
    case kTypeQ4_K:
    case kTypeQ5_K:
    case kTypeQ6_K:
      return kQK_K;
    default:
      return 0;
  }
}

// Bytes per block of `type`; 0 where BlockElements is 0.
BRAID_HD int BlockBytes(uint32_t type) {
  switch (type) {
    case kTypeF32:
      return 4;
    case kTypeF16:
    case kTypeBF16:
      return 2;
    case kTypeQ4_0:
      return sizeof(BlockQ4_0);
    case kTypeQ4_1:
      return sizeof(BlockQ4_1);
    case kTypeQ5_0:
      return sizeof(BlockQ5_0);
    case kTypeQ5_1:
      return sizeof(BlockQ5_1);
    case kTypeQ8_0:
      return sizeof(BlockQ8_0);
    case kTypeIQ4_NL:
      return sizeof(BlockIQ4_NL);
    case kTypeQ2_K:
      return sizeof(BlockQ2_K);
    case kTypeQ3_K:
      return sizeof(BlockQ3_K);
    case kTypeQ4_K:
      return sizeof(BlockQ4_K);
    case kTypeQ5_K:
      return sizeof(BlockQ5_K);
    case kTypeQ6_K:
      return sizeof(BlockQ6_K);
    default:
      return 0;
  }
}

// The type's GGUF name ("Q4_K"), or "unknown" (host only: error messages).
inline const char* TypeName(uint32_t type) {
  switch (type) {
    case kTypeF32:
      return "F32";
    case kTypeF16:
      return "F16";
    case kTypeBF16:
      return "BF16";
    case kTypeQ4_0:
      return "Q4_0";
    case kTypeQ4_1:
      return "Q4_1";
    case kTypeQ5_0:
      return "Q5_0";
    case kTypeQ5_1:
      return "Q5_1";
    case kTypeQ8_0:
      return "Q8_0";
    case 9:
      return "Q8_1";
    case kTypeIQ4_NL:
      return "IQ4_NL";
    case kTypeQ2_K:
      return "Q2_K";
    case kTypeQ3_K:
      return "Q3_K";
    case kTypeQ4_K:
      return "Q4_K";
    case kTypeQ5_K:
      return "Q5_K";
    case kTypeQ6_K:
      return "Q6_K";
    case 15:
      return "Q8_K";
    default:
      return "unknown";
  }
}

// ---- Scalar building blocks ------------------------------------------------

BRAID_HD float FloatFromBits(uint32_t w) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(w);
#else
  float f;
  std::memcpy(&f, &w, sizeof(f));
  return f;
#endif
}

BRAID_HD uint32_t BitsFromFloat(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t w;
  std::memcpy(&w, &f, sizeof(w));
  return w;
#endif
}

// IEEE half -> float, exact: subnormals normalised, infinities kept, a NaN
// made quiet with its payload and sign kept (what x86's F16C conversion and
// kernels/cpu's Fp16ToFp32 give).
BRAID_HD float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return FloatFromBits(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) {
    return FloatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return FloatFromBits(sign);
  // Subnormal: mantissa * 2^-24; shift the leading one to bit 10.
  uint32_t float_exponent = 113;  // 2^-14, the smallest normal half's
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return FloatFromBits(sign | (float_exponent << 23) |
                       ((mantissa & 0x3FFu) << 13));
}

BRAID_HD float Bf16ToFloat(uint16_t h) {
  return FloatFromBits(static_cast<uint32_t>(h) << 16);
}

// float -> bf16, round to nearest even (overflow to infinity); a NaN stays a
// quiet NaN (kernels/cpu's Fp32ToBf16).
BRAID_HD uint16_t FloatToBf16(float f) {
  const uint32_t w = BitsFromFloat(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((w >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
}

// ---- Float types: `count` (<= kGroupElements) consecutive elements --------

BRAID_HD void DecodeF32(const uint8_t* src, int count, float* out) {
  const auto* x = reinterpret_cast<const float*>(src);
  for (int k = 0; k < count; ++k) out[k] = x[k];
}

BRAID_HD void DecodeF16(const uint8_t* src, int count, float* out) {
  const auto* x = reinterpret_cast<const uint16_t*>(src);
  for (int k = 0; k < count; ++k) out[k] = Fp16ToFloat(x[k]);
}

BRAID_HD void DecodeBF16(const uint8_t* src, int count, float* out) {
  const auto* x = reinterpret_cast<const uint16_t*>(src);
  for (int k = 0; k < count; ++k) out[k] = Bf16ToFloat(x[k]);
}

// ---- Block types: out[k] = element i0 + k of the block, k < 8 --------------
// i0 is a multiple of kGroupElements below the block's element count.

// 32-element blocks: element e is nibble e / 16 of qs[e % 16].
BRAID_HD void DecodeQ4_0(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(block);
  const float d = Fp16ToFloat(b->d);
  const int shift = i0 < kQK / 2 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int q = (b->qs[i0 % (kQK / 2) + k] >> shift) & 0xF;
    out[k] = static_cast<float>(q - 8) * d;
  }
}

BRAID_HD void DecodeQ4_1(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(block);
  const float d = Fp16ToFloat(b->d);
  const float m = Fp16ToFloat(b->m);
  const int shift = i0 < kQK / 2 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int q = (b->qs[i0 % (kQK / 2) + k] >> shift) & 0xF;
    out[k] = static_cast<float>(q) * d + m;
  }
}

// The 5-bit values of Q5_0 / Q5_1 elements i0 .. i0 + 7.
BRAID_HD void Q5Values(const uint8_t* qs, const uint8_t* qh_bytes, int i0,
                       int* q) {
  const uint32_t qh = qh_bytes[0] | (qh_bytes[1] << 8) | (qh_bytes[2] << 16) |
                      (static_cast<uint32_t>(qh_bytes[3]) << 24);
  const int shift = i0 < kQK / 2 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int e = i0 + k;
    q[k] = ((qs[e % (kQK / 2)] >> shift) & 0xF) |
           static_cast<int>(((qh >> e) & 1u) << 4);
  }
}

BRAID_HD void DecodeQ5_0(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(block);
  const float d = Fp16ToFloat(b->d);
  int q[kGroupElements];
  Q5Values(b->qs, b->qh, i0, q);
  for (int k = 0; k < kGroupElements; ++k) {
    out[k] = static_cast<float>(q[k] - 16) * d;
  }
}

BRAID_HD void DecodeQ5_1(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ5_1*>(block);
  const float d = Fp16ToFloat(b->d);
  const float m = Fp16ToFloat(b->m);
  int q[kGroupElements];
  Q5Values(b->qs, b->qh, i0, q);
  for (int k = 0; k < kGroupElements; ++k) {
    out[k] = static_cast<float>(q[k]) * d + m;
  }
}

BRAID_HD void DecodeQ8_0(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(block);
  const float d = Fp16ToFloat(b->d);
  for (int k = 0; k < kGroupElements; ++k) {
    out[k] = static_cast<float>(b->qs[i0 + k]) * d;
  }
}

// ggml's kvalues_iq4nl, {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13,
// 25, 38, 53, 69, 89, 113}, as int8 bytes packed little-endian (integer
// shifts instead of a table, which device code would keep in local memory).
BRAID_HD int Iq4NlValue(int index) {
  constexpr uint64_t kLow = 0xF6EADDCFBFAD9881ull;
  constexpr uint64_t kHigh = 0x7159453526190D01ull;
  const uint64_t bytes = index < 8 ? kLow : kHigh;
  return static_cast<int8_t>(static_cast<uint8_t>(bytes >> (8 * (index & 7))));
}

BRAID_HD void DecodeIQ4_NL(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockIQ4_NL*>(block);
  const float d = Fp16ToFloat(b->d);
  const int shift = i0 < kQK / 2 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int q = (b->qs[i0 % (kQK / 2) + k] >> shift) & 0xF;
    out[k] = d * static_cast<float>(Iq4NlValue(q));
  }
}

// Q2_K / Q3_K: element e's low 2 bits are bits 2 * ((e % 128) / 32) of
// qs[(e / 128) * 32 + e % 32].
BRAID_HD int Low2Bits(const uint8_t* qs, int e) {
  return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// Sub-block e / 16: 4-bit scale (low nibble) and min (high nibble).
BRAID_HD void DecodeQ2_K(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(block);
  const uint8_t sc = b->scales[i0 / 16];
  const float dl = Fp16ToFloat(b->d) * static_cast<float>(sc & 0xF);
  const float ml = Fp16ToFloat(b->dmin) * static_cast<float>(sc >> 4);
  for (int k = 0; k < kGroupElements; ++k) {
    out[k] = dl * static_cast<float>(Low2Bits(b->qs, i0 + k)) - ml;
  }
}

// Sub-block j's (j < 16) 6-bit scale, minus 32.
BRAID_HD int ScaleQ3K(int j, const uint8_t* scales) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The third bit is bit e / 32 of hmask[e % 32]; the value minus 4.
BRAID_HD void DecodeQ3_K(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(block);
  const float dl =
      Fp16ToFloat(b->d) * static_cast<float>(ScaleQ3K(i0 / 16, b->scales));
  for (int k = 0; k < kGroupElements; ++k) {
    const int e = i0 + k;
    const int high = (b->hmask[e % 32] >> (e / 32)) & 1;
    out[k] = dl * static_cast<float>(Low2Bits(b->qs, e) + 4 * high - 4);
  }
}

// Q4_K / Q5_K sub-block j's (j < 8) 6-bit scale and min from the 12 bytes.
BRAID_HD void ScaleMinK4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Sub-block s = e / 32: nibble s % 2 of qs[(s / 2) * 32 + e % 32]; Q5_K adds
// bit s of qh[e % 32] as the fifth bit (qh null for Q4_K).
BRAID_HD void DecodeK4(uint16_t d_bits, uint16_t dmin_bits,
                       const uint8_t* scales, const uint8_t* qs,
                       const uint8_t* qh, int i0, float* out) {
  const int s = i0 / 32;
  int sc, m;
  ScaleMinK4(s, scales, &sc, &m);
  const float d1 = Fp16ToFloat(d_bits) * static_cast<float>(sc);
  const float m1 = Fp16ToFloat(dmin_bits) * static_cast<float>(m);
  const int shift = s % 2 == 0 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int l = (i0 + k) % 32;
    int v = (qs[(s / 2) * 32 + l] >> shift) & 0xF;
    if (qh != nullptr) v |= ((qh[l] >> s) & 1) << 4;
    out[k] = d1 * static_cast<float>(v) - m1;
  }
}

BRAID_HD void DecodeQ4_K(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(block);
  DecodeK4(b->d, b->dmin, b->scales, b->qs, nullptr, i0, out);
}

BRAID_HD void DecodeQ5_K(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ5_K*>(block);
  DecodeK4(b->d, b->dmin, b->scales, b->qs, b->qh, i0, out);
}

// In 128-element half h, element l + 32 * k (l < 32, k < 4) takes nibble
// k / 2 of ql[h * 64 + l + 32 * (k % 2)] and bits 2k, 2k + 1 of
// qh[h * 32 + l]; minus 32, times sub-block e / 16's int8 scale.
BRAID_HD void DecodeQ6_K(const uint8_t* block, int i0, float* out) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(block);
  const float dl = Fp16ToFloat(b->d) * static_cast<float>(b->scales[i0 / 16]);
  const int h = i0 / 128, quarter = (i0 % 128) / 32;
  const int shift = quarter < 2 ? 0 : 4;
  for (int k = 0; k < kGroupElements; ++k) {
    const int l = (i0 + k) % 32;
    const int low = (b->ql[h * 64 + l + 32 * (quarter % 2)] >> shift) & 0xF;
    const int high = (b->qh[h * 32 + l] >> (2 * quarter)) & 3;
    out[k] = dl * static_cast<float>((low | (high << 4)) - 32);
  }
}

// ---- Any type ---------------------------------------------------------------

// out[k] = element e0 + k (k < count) of a row of `type` starting at `row`.
// For the block types e0 is a multiple of kGroupElements and count is
// kGroupElements (their rows are whole blocks); for the float types any e0
// and a count up to kGroupElements.
// False (out untouched) for a type BlockElements says is not decoded.
BRAID_HD bool DecodeGroup(uint32_t type, const uint8_t* row, int64_t e0,
                          int count, float* out) {
  const int block_elements = BlockElements(type);
  if (block_elements == 0) return false;
  const uint8_t* block = row + e0 / block_elements * BlockBytes(type);
  const int i0 = static_cast<int>(e0 % block_elements);
  switch (type) {
    case kTypeF32:
      DecodeF32(block, count, out);
      break;
    case kTypeF16:
      DecodeF16(block, count, out);
      break;
    case kTypeBF16:
      DecodeBF16(block, count, out);
      break;
    case kTypeQ4_0:
      DecodeQ4_0(block, i0, out);
      break;
    case kTypeQ4_1:
      DecodeQ4_1(block, i0, out);
      break;
    case kTypeQ5_0:
      DecodeQ5_0(block, i0, out);
      break;
    case kTypeQ5_1:
      DecodeQ5_1(block, i0, out);
      break;
    case kTypeQ8_0:
      DecodeQ8_0(block, i0, out);
      break;
    case kTypeIQ4_NL:
      DecodeIQ4_NL(block, i0, out);
      break;
    case kTypeQ2_K:
      DecodeQ2_K(block, i0, out);
      break;
    case kTypeQ3_K:
      DecodeQ3_K(block, i0, out);
      break;
    case kTypeQ4_K:
      DecodeQ4_K(block, i0, out);
      break;
    case kTypeQ5_K:
      DecodeQ5_K(block, i0, out);
      break;
    case kTypeQ6_K:
      DecodeQ6_K(block, i0, out);
      break;
  }
  return true;
}

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_DEQUANT_BLOCKS_H_
