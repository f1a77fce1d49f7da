// DrawRows against the host's draw (model::DrawInIdOrder, the draw batching's
// Sampler makes over a whole row): random rows of a real vocabulary's size,
// several temperatures, u's across [0, 1); the device's id equals the host's
// except where u lies within rounding of a boundary between two ids. Needs
// a GPU (tools/gpu/check.sh).
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/draw.h"
#include "kernels/cuda/testing/device.h"
#include "model/top_logits.h"

namespace braid::model {
namespace {

using kernels::cuda::CudaRowDraw;
using kernels::cuda::DeviceBuffer;
using kernels::cuda::DrawRows;
namespace testing = kernels::cuda::testing;

// The running sums before and after id t under d, as the host takes them.
void Bounds(const std::vector<float>& row, float inv_t, int t, double* lo,
            double* hi, double* total) {
  float max = row[0] * inv_t;
  for (float v : row) max = std::max(max, v * inv_t);
  double sum = 0;
  for (float v : row) sum += std::exp(v * inv_t - max);
  double cum = 0;
  *total = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    const float p = static_cast<float>(std::exp(row[i] * inv_t - max) / sum);
    if (static_cast<int>(i) == t) *lo = cum;
    cum += p;
    if (static_cast<int>(i) == t) *hi = cum;
  }
  *total = cum;
}

TEST(DrawGpuTest, DrawsMatchTheHostsWalk) {
  constexpr int kVocab = 128256;
  constexpr int kRows = 24;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<float> logits(static_cast<size_t>(kRows) * kVocab);
  for (float& v : logits) v = normal(rng);
  std::vector<CudaRowDraw> draws(kRows);
  for (int r = 0; r < kRows; ++r) {
    // Every fourth row draws nothing, every fourth other one only asks for
    // its denominator (a nucleus); temperatures 0.3 .. 1.5.
    draws[r].inv_temperature = r % 4 == 3 ? 0.0f : 1.0f / (0.3f + 0.05f * r);
    draws[r].u = r == 0       ? 0.0
                 : r == 1     ? 0.999999
                 : r % 4 == 2 ? -1.0
                              : uniform(rng);
  }
  DeviceBuffer d_logits = testing::Upload(logits);
  DeviceBuffer d_draws = testing::Upload(draws);
  DeviceBuffer d_drawn = testing::Zeros<int32_t>(kRows);
  DeviceBuffer d_logit = testing::Zeros<float>(kRows);
  DeviceBuffer d_sums = testing::Zeros<double>(kRows);
  ASSERT_TRUE(DrawRows(d_logits.as<float>(), kRows, kVocab,
                       d_draws.as<CudaRowDraw>(), d_drawn.as<int32_t>(),
                       d_logit.as<float>(), d_sums.as<double>(), nullptr)
                  .ok());
  const std::vector<int32_t> drawn = testing::Download<int32_t>(d_drawn, kRows);
  const std::vector<float> drawn_logit =
      testing::Download<float>(d_logit, kRows);
  const std::vector<double> sums = testing::Download<double>(d_sums, kRows);
  int equal = 0;
  std::vector<float> scratch;
  for (int r = 0; r < kRows; ++r) {
    const std::vector<float> row(logits.begin() + int64_t{r} * kVocab,
                                 logits.begin() + int64_t{r + 1} * kVocab);
    if (draws[r].inv_temperature == 0.0f) {
      EXPECT_EQ(drawn[r], -1) << "row " << r;
      EXPECT_EQ(sums[r], 0.0) << "row " << r;
      continue;
    }
    // The denominator, as the host's nucleus takes it but for the order of
    // the sum (and a contracted multiply-add).
    const double want_sum =
        NucleusSum(row.data(), kVocab, draws[r].inv_temperature, &scratch);
    EXPECT_NEAR(sums[r], want_sum, 1e-5 * want_sum) << "row " << r;
    if (draws[r].u < 0) {
      EXPECT_EQ(drawn[r], -1) << "row " << r;
      continue;
    }
    const int want = DrawInIdOrder(row.data(), kVocab,
                                   {draws[r].inv_temperature, draws[r].u});
    ASSERT_GE(drawn[r], 0) << "row " << r;
    ASSERT_LT(drawn[r], kVocab) << "row " << r;
    EXPECT_EQ(drawn_logit[r], row[drawn[r]]) << "row " << r;
    if (drawn[r] == want) {
      ++equal;
      continue;
    }
    // Otherwise u * total lies within rounding of the boundary.
    double lo, hi, total;
    Bounds(row, draws[r].inv_temperature, drawn[r], &lo, &hi, &total);
    const double target = draws[r].u * total;
    EXPECT_LE(lo, target + 1e-6) << "row " << r;
    EXPECT_GE(hi, target - 1e-6) << "row " << r;
  }
  EXPECT_GE(equal, 10);  // of 12 drawing rows
}

TEST(DrawGpuTest, BadArgumentsAreRefused) {
  EXPECT_EQ(
      DrawRows(nullptr, 1, 10, nullptr, nullptr, nullptr, nullptr, nullptr)
          .code(),
      absl::StatusCode::kInvalidArgument);
  DeviceBuffer b = testing::Zeros<float>(16);
  EXPECT_EQ(DrawRows(b.as<float>(), -1, 10, b.as<CudaRowDraw>(),
                     b.as<int32_t>(), b.as<float>(), b.as<double>(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DrawRows(b.as<float>(), 1, 10, b.as<CudaRowDraw>(), b.as<int32_t>(),
                     b.as<float>(), nullptr, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braid::model
