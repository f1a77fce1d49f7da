// DequantizeToBf16 on the device against kernels/cpu, the oracle: for every
// weight type, random blocks dequantized on the GPU must equal
// Fp32ToBf16(DequantizeRow(...)) bit for bit. Needs a CUDA device (tag
// "gpu"; tools/gpu/check.sh runs it).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/dequant_blocks.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/testing/random_blocks.h"

namespace braid::kernels::cuda {
namespace {

using ::braid::kernels::cpu::DType;

constexpr DType kDecodedTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,   DType::kQ4_1,
    DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL, DType::kQ2_K,
    DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
};

// n elements of `type` as random blocks (testing/random_blocks.h).
std::vector<uint8_t> RandomTensor(DType type, int64_t n, std::mt19937& rng) {
  return testing::RandomBlocks(type, n / cpu::DTypeBlockSize(type), rng);
}

std::vector<uint16_t> CpuBf16(DType type, const std::vector<uint8_t>& src,
                              int64_t n) {
  std::vector<float> f(n);
  cpu::DequantizeRow(type, src.data(), f.data(), n);
  std::vector<uint16_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = cpu::Fp32ToBf16(f[i]);
  return out;
}

// Uploads `src`, dequantizes its n elements into a device buffer at element
// `dst_offset` (an offset of 1 makes the stores unaligned) on `stream`, and
// copies the result back.
void GpuBf16(DType type, const std::vector<uint8_t>& src, int64_t n,
             int64_t dst_offset, cudaStream_t stream,
             std::vector<uint16_t>* out) {
  absl::StatusOr<DeviceBuffer> d_src =
      DeviceBuffer::Allocate(src.size(), "dequant test source");
  ASSERT_TRUE(d_src.ok()) << d_src.status();
  absl::StatusOr<DeviceBuffer> d_dst = DeviceBuffer::Allocate(
      (n + dst_offset) * sizeof(uint16_t), "dequant test destination");
  ASSERT_TRUE(d_dst.ok()) << d_dst.status();
  ASSERT_EQ(
      cudaMemcpy(d_src->data(), src.data(), src.size(), cudaMemcpyHostToDevice),
      cudaSuccess);
  uint16_t* dst = d_dst->as<uint16_t>() + dst_offset;
  const absl::Status st = DequantizeToBf16(static_cast<uint32_t>(type),
                                           d_src->data(), n, dst, stream);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  out->assign(n, 0);
  ASSERT_EQ(cudaMemcpy(out->data(), dst, n * sizeof(uint16_t),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
}

void ExpectSame(const std::vector<uint16_t>& got,
                const std::vector<uint16_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  int mismatches = 0;
  for (size_t i = 0; i < got.size() && mismatches < 10; ++i) {
    if (got[i] != want[i]) {
      ++mismatches;
      ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << got[i]
                    << ", want 0x" << want[i];
    }
  }
}

class DequantGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess) << "no CUDA driver";
    ASSERT_GT(devices, 0) << "no CUDA device";
  }
};

TEST_F(DequantGpuTest, EveryTypeMatchesCpu) {
  std::mt19937 rng(4242);
  for (DType type : kDecodedTypes) {
    SCOPED_TRACE(cpu::DTypeName(type));
    // A few thousand elements; float types an odd count (a partial group).
    const int64_t n = cpu::DTypeBlockSize(type) == 1 ? 4099 : 4096;
    const std::vector<uint8_t> src = RandomTensor(type, n, rng);
    std::vector<uint16_t> got;
    GpuBf16(type, src, n, /*dst_offset=*/0, /*stream=*/nullptr, &got);
    ExpectSame(got, CpuBf16(type, src, n));
  }
}

TEST_F(DequantGpuTest, UnalignedDestinationAndOwnStream) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(17);
  for (DType type : {DType::kQ4_0, DType::kQ6_K, DType::kF16}) {
    SCOPED_TRACE(cpu::DTypeName(type));
    const int64_t n = 1024;
    const std::vector<uint8_t> src = RandomTensor(type, n, rng);
    std::vector<uint16_t> got;
    GpuBf16(type, src, n, /*dst_offset=*/1, stream, &got);
    ExpectSame(got, CpuBf16(type, src, n));
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// A 4096 x 4096 Q4_K matrix: 65536 super-blocks, a grid of many blocks.
TEST_F(DequantGpuTest, LargeQ4KMatrixMatchesCpu) {
  std::mt19937 rng(99);
  const int64_t n = int64_t{4096} * 4096;
  const std::vector<uint8_t> src = RandomTensor(DType::kQ4_K, n, rng);
  std::vector<uint16_t> got;
  GpuBf16(DType::kQ4_K, src, n, /*dst_offset=*/0, /*stream=*/nullptr, &got);
  ExpectSame(got, CpuBf16(DType::kQ4_K, src, n));
}

TEST_F(DequantGpuTest, ConvertF32ToBf16MatchesCpu) {
  std::mt19937 rng(5);
  const int64_t n = 1000;
  const std::vector<uint8_t> src = RandomTensor(DType::kF32, n, rng);
  absl::StatusOr<DeviceBuffer> d_src =
      DeviceBuffer::Allocate(src.size(), "f32");
  ASSERT_TRUE(d_src.ok()) << d_src.status();
  absl::StatusOr<DeviceBuffer> d_dst = DeviceBuffer::Allocate(n * 2, "bf16");
  ASSERT_TRUE(d_dst.ok()) << d_dst.status();
  ASSERT_EQ(
      cudaMemcpy(d_src->data(), src.data(), src.size(), cudaMemcpyHostToDevice),
      cudaSuccess);
  ASSERT_TRUE(
      ConvertF32ToBf16(d_src->as<float>(), n, d_dst->as<uint16_t>(), nullptr)
          .ok());
  std::vector<uint16_t> got(n);
  ASSERT_EQ(
      cudaMemcpy(got.data(), d_dst->data(), n * 2, cudaMemcpyDeviceToHost),
      cudaSuccess);
  ExpectSame(got, CpuBf16(DType::kF32, src, n));
}

// The argument checks come before any CUDA call.
TEST(DequantArgumentsTest, RejectsBadArguments) {
  alignas(16) static uint8_t src[1024];
  alignas(16) static uint16_t dst[512];
  const auto invalid = [](const absl::Status& st) {
    return st.code() == absl::StatusCode::kInvalidArgument;
  };
  // Activation types and unknown ids.
  for (uint32_t type : {9u, 15u, 4u, 99u}) {
    EXPECT_TRUE(invalid(DequantizeToBf16(type, src, 256, dst, nullptr)))
        << type;
  }
  // Not whole blocks, negative.
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeQ4_0, src, 33, dst, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeQ4_K, src, 128, dst, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeF16, src, -1, dst, nullptr)));
  // Null or misaligned pointers.
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeQ8_0, nullptr, 32, dst, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeQ8_0, src, 32, nullptr, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeF32, src + 2, 8, dst, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(kTypeQ4_0, src + 1, 32, dst, nullptr)));
  EXPECT_TRUE(invalid(DequantizeToBf16(
      kTypeQ4_0, src, 32, reinterpret_cast<uint16_t*>(src + 1), nullptr)));
  EXPECT_TRUE(invalid(ConvertF32ToBf16(nullptr, 8, dst, nullptr)));
  // Nothing to do is fine, whatever the pointers.
  EXPECT_TRUE(DequantizeToBf16(kTypeQ6_K, nullptr, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace braid::kernels::cuda
