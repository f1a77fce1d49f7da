// GemmPlans (cuBLASLt BF16 products and their epilogues) against a double
// reference on the same BF16 inputs: NMSE <= 1e-4 (the bound for
// BF16 GEMMs; f32 accumulation lands far below it). Needs a GPU.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/dequant_blocks.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/testing/device.h"

namespace braid::kernels::cuda {
namespace {

using testing::Download;
using testing::Nmse;
using testing::RandomFloats;
using testing::Upload;

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

TEST(GemmGpuTest, ProductsAndEpiloguesMatchTheReference) {
  const int max_m = 300;
  const std::vector<GemmShape> shapes = {
      {576, 576, GemmEpilogue::kNone},
      {1024, 2048, GemmEpilogue::kBias},
      {2048, 8192, GemmEpilogue::kResidual},
  };
  absl::StatusOr<std::unique_ptr<GemmPlans>> plans =
      GemmPlans::Create(shapes, max_m, size_t{32} << 20);
  ASSERT_TRUE(plans.ok()) << plans.status();
  for (int s = 0; s < static_cast<int>(shapes.size()); ++s) {
    const int n = shapes[s].n, k = shapes[s].k;
    std::vector<uint16_t> x =
        ToBf16(RandomFloats(static_cast<size_t>(max_m) * k, s));
    std::vector<uint16_t> w =
        ToBf16(RandomFloats(static_cast<size_t>(n) * k, s + 10));
    std::vector<float> bias = RandomFloats(n, s + 20);
    std::vector<float> y0 =
        RandomFloats(static_cast<size_t>(max_m) * n, s + 30);
    for (int m : {1, 3, 8, 64, 65, 200, 300}) {
      DeviceBuffer dx = Upload(x), dw = Upload(w), db = Upload(bias);
      DeviceBuffer dy = Upload(y0);
      ASSERT_TRUE((*plans)
                      ->Run(s, m, dx.as<uint16_t>(), dw.as<uint16_t>(),
                            db.as<float>(), dy.as<float>(), nullptr)
                      .ok());
      std::vector<float> got = Download<float>(dy, static_cast<size_t>(m) * n);
      std::vector<float> want(static_cast<size_t>(m) * n);
      for (int r = 0; r < m; ++r) {
        for (int c = 0; c < n; ++c) {
          double acc = 0.0;
          for (int i = 0; i < k; ++i) {
            acc += double{Bf16ToFloat(x[static_cast<size_t>(r) * k + i])} *
                   Bf16ToFloat(w[static_cast<size_t>(c) * k + i]);
          }
          if (shapes[s].epilogue == GemmEpilogue::kBias) acc += bias[c];
          if (shapes[s].epilogue == GemmEpilogue::kResidual) {
            acc += y0[static_cast<size_t>(r) * n + c];
          }
          want[static_cast<size_t>(r) * n + c] = static_cast<float>(acc);
        }
      }
      EXPECT_LE(Nmse(got, want), 1e-4) << "shape " << s << " m " << m;
    }
  }
}

TEST(GemmGpuTest, RejectsBadShapesAndSizes) {
  EXPECT_EQ(GemmPlans::Create({{64, 60, GemmEpilogue::kNone}}, 8, 1 << 20)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<GemmPlans>> plans =
      GemmPlans::Create({{64, 64, GemmEpilogue::kNone}}, 8, 1 << 20);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ(
      (*plans)->Run(0, 9, nullptr, nullptr, nullptr, nullptr, nullptr).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (*plans)->Run(1, 1, nullptr, nullptr, nullptr, nullptr, nullptr).code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braid::kernels::cuda
