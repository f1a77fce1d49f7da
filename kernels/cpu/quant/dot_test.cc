#include "kernels/cpu/quant/dot.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant/quant.h"

namespace braid::kernels::cpu {
namespace {

std::vector<float> RandomRow(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(DTypeRowBytes(t, x.size()));
  QuantizeRow(t, x.data(), q.data(), x.size());
  return q;
}

// Naive reference: dequantize both sides, float dot in double.
double ReferenceDot(DType wt, const void* w, DType xt, const void* x, int n) {
  std::vector<float> wf(n), xf(n);
  DequantizeRow(wt, w, wf.data(), n);
  DequantizeRow(xt, x, xf.data(), n);
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(wf[i]) * xf[i];
  return s;
}

class DotTest : public ::testing::TestWithParam<DType> {};

TEST_P(DotTest, MatchesDequantizedReferenceOnBothPaths) {
  const DType wt = GetParam();
  const DType xt = ActivationDType(wt);
  const int64_t block = DTypeBlockSize(xt == DType::kF32 ? wt : xt);
  for (int n : {32, 64, 576, 1536, 2048}) {
    if (n % block != 0) continue;
    const auto w = Quantize(wt, RandomRow(n, n));
    const auto x = Quantize(xt, RandomRow(n, n + 1));
    const double ref = ReferenceDot(wt, w.data(), xt, x.data(), n);
    // Q4_1's s = fp16(d * sum(q)) adds rounding the reference does not have.
    const double tol = 3e-3 * std::sqrt(n) + 1e-4 * std::fabs(ref);
    const float fast = DotRow(wt, w.data(), x.data(), n);
    SetForceScalarForTesting(true);
    const float slow = DotRow(wt, w.data(), x.data(), n);
    SetForceScalarForTesting(false);
    EXPECT_NEAR(fast, ref, tol) << DTypeName(wt) << " n=" << n;
    EXPECT_NEAR(slow, ref, tol) << DTypeName(wt) << " n=" << n;
    EXPECT_NEAR(fast, slow, tol) << DTypeName(wt) << " n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllWeightTypes, DotTest,
    ::testing::Values(DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kF16,
                      DType::kBF16, DType::kF32, DType::kQ5_0, DType::kQ5_1,
                      DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                      DType::kQ5_K, DType::kQ6_K),
    [](const auto& info) { return std::string(DTypeName(info.param)); });

// The K-quant dots: the AVX2 path equals the scalar one bit for bit (same
// integers, same float steps), on random bytes (every bit pattern of the
// quants and scales, not only what a quantizer writes) with finite scales.
TEST(DotTest, KQuantAvx2EqualsScalarOnRandomBlocks) {
  if (!GetCpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  const int n = 4 * kQK_K;
  for (DType wt :
       {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> w(DTypeRowBytes(wt, n));
      for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
      // Finite fp16 scales: overwrite d (and dmin) with small values.
      const size_t bytes = DTypeBlockBytes(wt);
      for (int b = 0; b < n / kQK_K; ++b) {
        uint8_t* blk = w.data() + b * bytes;
        const uint16_t d = Fp32ToFp16(0.01f * (1 + trial));
        const uint16_t dmin = Fp32ToFp16(0.003f * (1 + b));
        size_t at = 0;  // d's offset; dmin follows where the type has one
        switch (wt) {
          case DType::kQ2_K:
            at = 80;
            break;
          case DType::kQ3_K:
            at = 108;
            break;
          case DType::kQ6_K:
            at = 208;
            break;
          default:
            at = 0;
            break;
        }
        std::memcpy(blk + at, &d, 2);
        if (wt != DType::kQ3_K && wt != DType::kQ6_K) {
          std::memcpy(blk + at + 2, &dmin, 2);
        }
      }
      const auto x = Quantize(DType::kQ8_K, RandomRow(n, trial));
      const float fast = DotRow(wt, w.data(), x.data(), n);
      SetForceScalarForTesting(true);
      const float slow = DotRow(wt, w.data(), x.data(), n);
      SetForceScalarForTesting(false);
      EXPECT_EQ(fast, slow) << DTypeName(wt) << " trial " << trial;
      const double ref = ReferenceDot(wt, w.data(), DType::kQ8_K, x.data(), n);
      EXPECT_NEAR(fast, ref, 1e-4 * std::fabs(ref) + 1e-3)
          << DTypeName(wt) << " trial " << trial;
    }
  }
}

// Q8_K: bsums are the sums of each 16 quants, and the values round trip.
TEST(DotTest, Q8KBlocksCarryTheirSums) {
  const auto x = RandomRow(kQK_K, 11);
  BlockQ8_K b;
  QuantizeRowQ8_K(x.data(), &b, kQK_K);
  for (int s = 0; s < 16; ++s) {
    int sum = 0;
    for (int e = 0; e < 16; ++e) sum += b.qs[s * 16 + e];
    EXPECT_EQ(b.bsums[s], sum);
  }
  for (int e = 0; e < kQK_K; ++e) {
    EXPECT_NEAR(b.qs[e] * b.d, x[e], std::fabs(b.d) / 2 + 1e-6f);
  }
}

// Float rows have one order on every path (dot.h): the AVX2 dots equal the
// scalar ones bit for bit, tails (n % 16, n % 8) included.
TEST(DotTest, ExplicitAvx2MatchesScalarForOddLengths) {
  if (!GetCpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int n : {1, 7, 8, 9, 16, 17, 24, 31, 63, 64, 100, 576}) {
    const auto w = RandomRow(n, 3);
    const auto x = RandomRow(n, 4);
    std::vector<uint16_t> wh(n), wb(n);
    Fp32ToFp16Row(w.data(), wh.data(), n);
    for (int i = 0; i < n; ++i) wb[i] = Fp32ToBf16(w[i]);
    EXPECT_EQ(internal::DotF32F32Avx2(w.data(), x.data(), n),
              internal::DotF32F32Scalar(w.data(), x.data(), n))
        << n;
    EXPECT_EQ(internal::DotF16F32Avx2(wh.data(), x.data(), n),
              internal::DotF16F32Scalar(wh.data(), x.data(), n))
        << n;
    EXPECT_EQ(internal::DotBF16F32Avx2(wb.data(), x.data(), n),
              internal::DotBF16F32Scalar(wb.data(), x.data(), n))
        << n;
    std::vector<float> y1(n, 1.0f), y2(n, 1.0f);
    internal::AxpyF16Avx2(0.5f, wh.data(), y1.data(), n);
    internal::AxpyF16Scalar(0.5f, wh.data(), y2.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-6);
  }
}

// Extreme quants (+-127, the quantizer's range) must not saturate the int16
// pair sums of maddubs. (-128 is never produced; like ggml, the AVX2 sign trick
// would overflow on it.)
TEST(DotTest, ExtremeValuesDoNotSaturate) {
  BlockQ8_0 w, x;
  w.d = x.d = Fp32ToFp16(1.0f);
  for (int j = 0; j < 32; ++j) {
    w.qs[j] = -127;
    x.qs[j] = -127;
  }
  const float expected = 32.0f * 127 * 127;
  EXPECT_EQ(internal::DotQ8_0Q8_0Scalar(&w, &x, 32), expected);
  if (GetCpuFeatures().avx2) {
    EXPECT_EQ(internal::DotQ8_0Q8_0Avx2(&w, &x, 32), expected);
  }
}

std::vector<uint16_t> RandomF16Row(int n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  const std::vector<float> x = RandomRow(n, seed);
  for (int i = 0; i < n; ++i) h[i] = Fp32ToFp16(x[i]);
  return h;
}

// The ggml-ordered F16 dots: both paths bit-identical (they mirror one
// summation order), each close to the exact dot, and Vec's n % 64 tail counted.
TEST(DotTest, F16DotsInGgmlOrderAgreeAcrossPaths) {
  for (int n : {16, 64, 80, 256, 1000}) {
    const std::vector<uint16_t> x = RandomF16Row(n, n);
    const std::vector<uint16_t> y16 = RandomF16Row(n, n + 1);
    std::vector<float> y(n);
    for (int i = 0; i < n; ++i) y[i] = Fp16ToFp32(y16[i]);
    double ref = 0;
    for (int i = 0; i < n; ++i) ref += double{Fp16ToFp32(x[i])} * y[i];
    const float vec = DotF16F32Vec(x.data(), y.data(), n);
    SetForceScalarForTesting(true);
    const float vec_scalar = DotF16F32Vec(x.data(), y.data(), n);
    SetForceScalarForTesting(false);
    EXPECT_EQ(vec, vec_scalar) << n;
    EXPECT_NEAR(vec, ref, 1e-5 * n) << n;
    if (n % 16 == 0) {
      const float gemm = DotF16F32Gemm(x.data(), y.data(), n);
      SetForceScalarForTesting(true);
      const float gemm_scalar = DotF16F32Gemm(x.data(), y.data(), n);
      SetForceScalarForTesting(false);
      EXPECT_EQ(gemm, gemm_scalar) << n;
      EXPECT_NEAR(gemm, ref, 1e-5 * n) << n;
    }
  }
}

// Lane order is observable: 2^24 + 1 - 2^24 loses the 1 when the three land
// in one lane in that order, and keeps it when the 1 is summed last.
TEST(DotTest, F16DotsUseGgmlLaneLayout) {
  std::vector<uint16_t> x(64, Fp32ToFp16(0.0f));
  std::vector<float> y(64, 1.0f);
  // Elements 0, 16, 32 share lane 0 of tinyBLAS's one accumulator, but sit in
  // three of ggml_vec_dot_f16's four accumulators, which add 0+2 first.
  x[0] = Fp32ToFp16(2048.0f);
  y[0] = 8192.0f;  // 2^24
  x[16] = Fp32ToFp16(1.0f);
  x[32] = Fp32ToFp16(-2048.0f);
  y[32] = 8192.0f;
  for (bool scalar : {false, true}) {
    SetForceScalarForTesting(scalar);
    EXPECT_EQ(DotF16F32Gemm(x.data(), y.data(), 64), 0.0f) << scalar;
    EXPECT_EQ(DotF16F32Vec(x.data(), y.data(), 64), 1.0f) << scalar;
  }
  SetForceScalarForTesting(false);
}

// The row forms of the attention kernels give the same bits on the AVX-512
// path (where the CPU has it), the AVX2 path and the scalar path, for head
// sizes with and without a tail past the vector width.
TEST(DotTest, F16RowKernelsBitIdenticalOnEveryPath) {
  for (int n : {16, 48, 64, 80, 128, 200}) {
    constexpr int kRows = 5;
    std::vector<std::vector<uint16_t>> rows;
    std::vector<const uint16_t*> ptrs;
    for (int r = 0; r < kRows; ++r) rows.push_back(RandomF16Row(n, 100 + r));
    for (const auto& row : rows) ptrs.push_back(row.data());
    const std::vector<float> y = RandomRow(n, 7);
    const std::vector<float> a = RandomRow(kRows, 8);
    const std::vector<float> base = RandomRow(n, 9);
    std::vector<float> want_vec, want_gemm, want_axpy, want_add;
    for (int mode = 0; mode < 3; ++mode) {
      SetDisableAvx512ForTesting(mode != 0);
      SetForceScalarForTesting(mode == 2);
      std::vector<float> vec(kRows), gemm(kRows), add = base;
      std::vector<std::vector<float>> acc(kRows, base);
      std::vector<float*> dst;
      for (auto& row : acc) dst.push_back(row.data());
      DotF16F32VecRows(ptrs.data(), kRows, y.data(), n, vec.data());
      if (n % 16 == 0) {
        DotF16F32GemmRows(ptrs.data(), kRows, y.data(), n, gemm.data());
      }
      AxpyF16Rows(a.data(), ptrs.data(), dst.data(), kRows, n);
      AddF32(y.data(), add.data(), n);
      std::vector<float> axpy;
      for (const auto& row : acc)
        axpy.insert(axpy.end(), row.begin(), row.end());
      if (mode == 0) {
        want_vec = vec, want_gemm = gemm, want_axpy = axpy, want_add = add;
        continue;
      }
      for (int r = 0; r < kRows; ++r) {
        EXPECT_EQ(vec[r], want_vec[r]) << "n " << n << " mode " << mode;
        EXPECT_EQ(gemm[r], want_gemm[r]) << "n " << n << " mode " << mode;
      }
      for (size_t i = 0; i < axpy.size(); ++i) {
        ASSERT_EQ(axpy[i], want_axpy[i]) << "n " << n << " mode " << mode;
      }
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(add[i], want_add[i]) << "n " << n << " mode " << mode;
      }
    }
    SetDisableAvx512ForTesting(false);
    SetForceScalarForTesting(false);
  }
}

TEST(DotTest, AddF32) {
  std::vector<float> x = RandomRow(19, 1), y = RandomRow(19, 2), want(19);
  for (int i = 0; i < 19; ++i) want[i] = y[i] + x[i];
  AddF32(x.data(), y.data(), 19);
  EXPECT_EQ(y, want);
}

}  // namespace
}  // namespace braid::kernels::cpu
