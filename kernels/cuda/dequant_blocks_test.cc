// dequant_blocks.h on the host against kernels/cpu, the oracle: every weight
// type's decoded floats bit for bit against DequantizeRow, the fp16 -> float
// conversion over all 65536 halves, and the bf16 rounding. The device runs
// the same inline functions (dequant_gpu_test.cc checks the kernel).
#include "kernels/cuda/dequant_blocks.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cuda/testing/random_blocks.h"

namespace braid::kernels::cuda {
namespace {

using ::braid::kernels::cpu::DType;
using testing::RandomBlocks;

constexpr DType kDecodedTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,   DType::kQ4_1,
    DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL, DType::kQ2_K,
    DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
};

uint32_t Bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof(w));
  return w;
}

float FromBits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof(f));
  return f;
}

// Decodes a row of n elements group by group, as the kernel does; `step` 1
// (float types) one element at a time, as the kernel does a partial group.
std::vector<float> DecodeRow(DType type, const uint8_t* row, int64_t n,
                             int step = kGroupElements) {
  std::vector<float> out(n);
  for (int64_t e0 = 0; e0 < n; e0 += step) {
    const int count =
        static_cast<int>(n - e0 < step ? n - e0 : static_cast<int64_t>(step));
    EXPECT_TRUE(DecodeGroup(static_cast<uint32_t>(type), row, e0, count,
                            out.data() + e0));
  }
  return out;
}

void ExpectSameBits(const std::vector<float>& got,
                    const std::vector<float>& want) {
  int mismatches = 0;
  for (size_t e = 0; e < want.size() && mismatches < 10; ++e) {
    if (Bits(got[e]) != Bits(want[e])) {
      ++mismatches;
      ADD_FAILURE() << "n " << want.size() << " element " << e << ": got "
                    << got[e] << " (0x" << std::hex << Bits(got[e])
                    << "), want " << std::dec << want[e] << " (0x" << std::hex
                    << Bits(want[e]) << ")";
    }
  }
}

TEST(DequantBlocksTest, TypeIdsAreGgmls) {
  static_assert(kTypeF32 == static_cast<uint32_t>(DType::kF32));
  static_assert(kTypeF16 == static_cast<uint32_t>(DType::kF16));
  static_assert(kTypeBF16 == static_cast<uint32_t>(DType::kBF16));
  static_assert(kTypeQ4_0 == static_cast<uint32_t>(DType::kQ4_0));
  static_assert(kTypeQ4_1 == static_cast<uint32_t>(DType::kQ4_1));
  static_assert(kTypeQ5_0 == static_cast<uint32_t>(DType::kQ5_0));
  static_assert(kTypeQ5_1 == static_cast<uint32_t>(DType::kQ5_1));
  static_assert(kTypeQ8_0 == static_cast<uint32_t>(DType::kQ8_0));
  static_assert(kTypeIQ4_NL == static_cast<uint32_t>(DType::kIQ4_NL));
  static_assert(kTypeQ2_K == static_cast<uint32_t>(DType::kQ2_K));
  static_assert(kTypeQ3_K == static_cast<uint32_t>(DType::kQ3_K));
  static_assert(kTypeQ4_K == static_cast<uint32_t>(DType::kQ4_K));
  static_assert(kTypeQ5_K == static_cast<uint32_t>(DType::kQ5_K));
  static_assert(kTypeQ6_K == static_cast<uint32_t>(DType::kQ6_K));
}

TEST(DequantBlocksTest, BlockSizesMatchCpu) {
  for (DType type : kDecodedTypes) {
    const auto id = static_cast<uint32_t>(type);
    SCOPED_TRACE(TypeName(id));
    EXPECT_EQ(BlockElements(id), cpu::DTypeBlockSize(type));
    EXPECT_EQ(BlockBytes(id), cpu::DTypeBlockBytes(type));
    EXPECT_STREQ(TypeName(id), cpu::DTypeName(type));
    EXPECT_EQ(BlockElements(id) % kGroupElements == 0, BlockElements(id) > 1);
  }
  // Activation types and unknown ids are not decoded.
  for (uint32_t id : {9u, 15u, 4u, 5u, 16u, 31u, 1000u}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(BlockElements(id), 0);
    EXPECT_EQ(BlockBytes(id), 0);
    float out[kGroupElements] = {};
    const uint8_t block[512] = {};
    EXPECT_FALSE(DecodeGroup(id, block, 0, kGroupElements, out));
  }
}

TEST(DequantBlocksTest, Iq4NlValuesMatchCpu) {
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(Iq4NlValue(i), cpu::kIq4NlValues[i]) << i;
  }
}

// Every type, several rows of several blocks: the decoded floats are
// DequantizeRow's bit for bit.
TEST(DequantBlocksTest, DecodeMatchesCpuDequantizeRow) {
  std::mt19937 rng(20240601);
  for (DType type : kDecodedTypes) {
    const auto id = static_cast<uint32_t>(type);
    SCOPED_TRACE(TypeName(id));
    const int64_t block_elements = BlockElements(id);
    // Float types: rows whose lengths are not multiples of the group too.
    const std::vector<int64_t> row_blocks =
        block_elements == 1 ? std::vector<int64_t>{8, 37, 1, 250}
                            : std::vector<int64_t>{1, 3, 7, 16, 64};
    for (int64_t blocks : row_blocks) {
      const int64_t n = blocks * block_elements;
      const std::vector<uint8_t> row = RandomBlocks(type, blocks, rng);
      std::vector<float> want(n);
      cpu::DequantizeRow(type, row.data(), want.data(), n);
      ExpectSameBits(DecodeRow(type, row.data(), n), want);
      if (block_elements == 1) {
        ExpectSameBits(DecodeRow(type, row.data(), n, /*step=*/1), want);
      }
    }
  }
}

TEST(DequantBlocksTest, Fp16ToFloatMatchesCpuForAllHalves) {
  std::vector<uint16_t> halves(65536);
  for (int h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> row(65536);
  cpu::Fp16ToFp32Row(halves.data(), row.data(), 65536);
  for (int h = 0; h < 65536; ++h) {
    const uint32_t got = Bits(Fp16ToFloat(static_cast<uint16_t>(h)));
    ASSERT_EQ(got, Bits(cpu::Fp16ToFp32(static_cast<uint16_t>(h))))
        << std::hex << "half 0x" << h;
    ASSERT_EQ(got, Bits(row[h])) << std::hex << "half 0x" << h;
  }
  // Spot checks that do not lean on the CPU: the smallest subnormal, the
  // largest normal, infinity, a NaN made quiet.
  EXPECT_EQ(Fp16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(Fp16ToFloat(0x83FF), -0x3FFp-24f);
  EXPECT_EQ(Fp16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(Bits(Fp16ToFloat(0xFC00)), 0xFF800000u);
  EXPECT_EQ(Bits(Fp16ToFloat(0x7C01)), 0x7FC02000u);
  EXPECT_EQ(Bits(Fp16ToFloat(0x8000)), 0x80000000u);
}

// Round to nearest even by plain bit manipulation; NaN: quiet, sign and top
// payload bits kept.
uint16_t ReferenceBf16(uint32_t w) {
  if ((w & 0x7F800000u) == 0x7F800000u && (w & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((w >> 16) | 0x0040u);
  }
  uint32_t upper = w >> 16;
  const uint32_t lower = w & 0xFFFFu;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u) != 0)) ++upper;
  return static_cast<uint16_t>(upper);
}

TEST(DequantBlocksTest, FloatToBf16RoundsToNearestEven) {
  struct Case {
    uint32_t in;
    uint16_t want;
  };
  const Case cases[] = {
      {0x3F800000u, 0x3F80},  // 1.0 exact
      {0x3F808000u, 0x3F80},  // tie, even stays
      {0x3F818000u, 0x3F82},  // tie, odd rounds up
      {0x3F808001u, 0x3F81},  // just above the tie
      {0x3F807FFFu, 0x3F80},  // just below the tie
      {0xBF818000u, 0xBF82},  // negative tie
      {0x7F7F7FFFu, 0x7F7F},  // largest that stays finite
      {0x7F7F8000u, 0x7F80},  // tie at the top: to infinity (even)
      {0x7F7FFFFFu, 0x7F80},  // FLT_MAX rounds to infinity
      {0xFF7FFFFFu, 0xFF80},  // -FLT_MAX to -infinity
      {0x7F800000u, 0x7F80},  // infinity
      {0xFF800000u, 0xFF80},  // -infinity
      {0x80000000u, 0x8000},  // negative zero
      {0x00000000u, 0x0000},  // zero
      {0x00008000u, 0x0000},  // subnormal tie to even zero
      {0x00018000u, 0x0002},  // subnormal tie, odd rounds up
      {0x7FC00000u, 0x7FC0},  // quiet NaN
      {0x7F800001u, 0x7FC0},  // signalling NaN, payload only in low bits
      {0xFFA00000u, 0xFFE0},  // negative signalling NaN made quiet
      {0x7FFFFFFFu, 0x7FFF},  // NaN that must not round into infinity
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToBf16(FromBits(c.in)), c.want) << std::hex << c.in;
    EXPECT_EQ(ReferenceBf16(c.in), c.want) << std::hex << c.in;
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t w = static_cast<uint32_t>(rng());
    const uint16_t got = FloatToBf16(FromBits(w));
    ASSERT_EQ(got, ReferenceBf16(w)) << std::hex << w;
    ASSERT_EQ(got, cpu::Fp32ToBf16(FromBits(w))) << std::hex << w;
  }
}

TEST(DequantBlocksTest, Bf16ToFloatIsExact) {
  for (int h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    ASSERT_EQ(Bits(Bf16ToFloat(b)), Bits(cpu::Bf16ToFp32(b))) << h;
    ASSERT_EQ(Bits(Bf16ToFloat(b)), static_cast<uint32_t>(h) << 16) << h;
    // A bf16 value converts back to itself (NaNs made quiet).
    const uint16_t back = FloatToBf16(Bf16ToFloat(b));
    const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
    EXPECT_EQ(back, nan ? static_cast<uint16_t>(b | 0x40) : b) << h;
  }
}

}  // namespace
}  // namespace braid::kernels::cuda
