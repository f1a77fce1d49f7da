#include "kernels/cpu/gemm/packed_gemm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu {
namespace {

// Aborts with a message when a precondition fails (a caller's bug).
void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "packed_gemm: %s\n", what);
    std::abort();
  }
}

}  // namespace

bool UsesPackedActivations(DType type) {
  return (type == DType::kQ4_1 || type == DType::kQ8_0) && UseAvx512();
}

bool CanPackWeights(DType type, int64_t rows, int64_t cols) {
  return UsesPackedActivations(type) && rows > 0 && rows % kPackRows == 0 &&
         cols > 0 && cols % kQK == 0;
}

PackedWeights PackWeights(DType type, const void* w, int64_t rows,
                          int64_t cols) {
  Require(type == DType::kQ4_1 || type == DType::kQ8_0, "type not packable");
  Require(rows % kPackRows == 0 && cols % kQK == 0, "shape not packable");
  const int64_t nb = cols / kQK;
  const int64_t scale_area = PackedScaleAreaBytes(type, nb);
  const int64_t group_bytes = PackedGroupBytes(type, nb);
  PackedWeights p;
  p.type = type;
  p.rows = rows;
  p.cols = cols;
  p.bytes = static_cast<size_t>(rows / kPackRows * group_bytes);
  p.data = AllocateAlignedBytes(p.bytes);
  Require(p.data != nullptr, "out of memory");
  std::memset(p.data.get(), 0, p.bytes);
  const uint8_t* src = static_cast<const uint8_t*>(w);
  const size_t row_bytes = DTypeRowBytes(type, cols);
  for (int64_t g = 0; g < rows / kPackRows; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* sc = p.data.get() + g * group_bytes + i * PackedScaleBytes(type);
      uint8_t* ch = p.data.get() + g * group_bytes + scale_area +
                    i * PackedChunkBytes(type);
      for (int64_t j = 0; j < kPackRows; ++j) {
        const uint8_t* row = src + (g * kPackRows + j) * row_bytes;
        if (type == DType::kQ4_1) {
          BlockQ4_1 b;
          std::memcpy(&b, row + i * sizeof(BlockQ4_1), sizeof b);
          std::memcpy(sc + 2 * j, &b.d, 2);
          std::memcpy(sc + 32 + 2 * j, &b.m, 2);
          for (int k = 0; k < 4; ++k) {
            std::memcpy(ch + 64 * k + 4 * j, b.qs + 4 * k, 4);
          }
        } else {
          BlockQ8_0 b;
          std::memcpy(&b, row + i * sizeof(BlockQ8_0), sizeof b);
          std::memcpy(sc + 2 * j, &b.d, 2);
          for (int k = 0; k < 8; ++k) {
            for (int e = 0; e < 4; ++e) {
              ch[64 * k + 4 * j + e] =
                  static_cast<uint8_t>(b.qs[4 * k + e] + 128);
            }
          }
        }
      }
    }
  }
  return p;
}

size_t PackedActivationFloats(int64_t cols, int64_t n_tok) {
  return static_cast<size_t>(2 * n_tok * (cols / kQK));
}

void PreparePackedActivations(DType weight_type, const uint8_t* x,
                              size_t x_row_bytes, int64_t cols, int64_t n_tok,
                              float* tables) {
  const int64_t nb = cols / kQK;
  float* xd = tables;
  float* xs = tables + n_tok * nb;
  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* row = x + t * x_row_bytes;
    for (int64_t i = 0; i < nb; ++i) {
      if (weight_type == DType::kQ4_1) {
        BlockQ8_1 b;
        std::memcpy(&b, row + i * sizeof b, sizeof b);
        xd[t * nb + i] = Fp16ToFp32(b.d);
        xs[t * nb + i] = Fp16ToFp32(b.s);
      } else {
        BlockQ8_0 b;
        std::memcpy(&b, row + i * sizeof b, sizeof b);
        int32_t sum = 0;
        for (int e = 0; e < kQK; ++e) sum += b.qs[e];
        const int32_t init = -128 * sum;
        xd[t * nb + i] = Fp16ToFp32(b.d);
        std::memcpy(&xs[t * nb + i], &init, 4);
      }
    }
  }
}

void PackedGemm(const PackedWeights& w, const uint8_t* x, size_t x_row_bytes,
                const float* tables, int64_t n_tok, int64_t r0, int64_t r1,
                float* y, int64_t ld_y, bool accumulate) {
  Require(r0 % kPackRows == 0 && r1 % kPackRows == 0 && r1 <= w.rows,
          "row range not a run of whole groups");
  internal::PackedGemmAvx512(w, x, x_row_bytes, tables, n_tok, r0, r1, y, ld_y,
                             accumulate);
}

float PackedDotReference(DType type, const uint8_t* w_row, const uint8_t* x_row,
                         int64_t cols) {
  float acc = 0.0f;
  for (int64_t i = 0; i < cols / kQK; ++i) {
    if (type == DType::kQ4_1) {
      BlockQ4_1 w;
      BlockQ8_1 x;
      std::memcpy(&w, w_row + i * sizeof w, sizeof w);
      std::memcpy(&x, x_row + i * sizeof x, sizeof x);
      int32_t isum = 0;
      for (int e = 0; e < kQK / 2; ++e) {
        isum += (w.qs[e] & 0x0F) * x.qs[e];
        isum += (w.qs[e] >> 4) * x.qs[e + kQK / 2];
      }
      acc = std::fma(Fp16ToFp32(w.d) * Fp16ToFp32(x.d),
                     static_cast<float>(isum), acc);
      acc = std::fma(Fp16ToFp32(w.m), Fp16ToFp32(x.s), acc);
    } else {
      BlockQ8_0 w;
      BlockQ8_0 x;
      std::memcpy(&w, w_row + i * sizeof w, sizeof w);
      std::memcpy(&x, x_row + i * sizeof x, sizeof x);
      int32_t isum = 0;
      for (int e = 0; e < kQK; ++e) isum += w.qs[e] * x.qs[e];
      acc = std::fma(Fp16ToFp32(w.d) * Fp16ToFp32(x.d),
                     static_cast<float>(isum), acc);
    }
  }
  return acc;
}

}  // namespace braid::kernels::cpu
