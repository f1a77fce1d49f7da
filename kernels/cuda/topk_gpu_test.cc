// TopKLogits (kernels/cuda/topk.h) against a straightforward host
// reference (std::partial_sort in the same order, log_z in double): ids and
// values exactly equal (values bit for bit, -0.0f included), log_z within
// 1e-5 relative. Random rows, rows full of ties, infinities and signed
// zeros, a CUDA graph capture, and the argument errors. Needs a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/device.h"
#include "kernels/cuda/topk.h"

namespace braid::kernels::cuda {
namespace {

using testing::Download;
using testing::RandomFloats;
using testing::Upload;
using testing::Zeros;

constexpr double kLogZTolerance = 1e-5;
constexpr int kKs[] = {1, 2, 50, 256, 1024};

// A TopKLogits result on the host: ids, values [n_rows, k]; log_z [n_rows].
struct TopK {
  std::vector<int32_t> ids;
  std::vector<float> values;
  std::vector<float> log_z;
};

uint32_t Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  return u;
}

// The reference: each row's k largest by value descending, then id
// ascending (float comparison: -0.0f == +0.0f); log_z in double.
TopK HostTopK(const std::vector<float>& logits, int n_rows, int n_vocab,
              int k) {
  TopK out;
  std::vector<int32_t> order(n_vocab);
  for (int r = 0; r < n_rows; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * n_vocab;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    for (int j = 0; j < k; ++j) {
      out.ids.push_back(order[j]);
      out.values.push_back(row[order[j]]);
    }
    const double max = *std::max_element(row, row + n_vocab);
    if (!std::isfinite(max)) {
      out.log_z.push_back(static_cast<float>(max));
      continue;
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(row[i] - max);
    out.log_z.push_back(static_cast<float>(max + std::log(sum)));
  }
  return out;
}

// TopKLogits on the device (on `stream`), fetched back.
TopK DeviceTopK(const std::vector<float>& logits, int n_rows, int n_vocab,
                int k, cudaStream_t stream = nullptr) {
  DeviceBuffer d_logits = Upload(logits);
  DeviceBuffer d_ids = Zeros<int32_t>(static_cast<size_t>(n_rows) * k);
  DeviceBuffer d_values = Zeros<float>(static_cast<size_t>(n_rows) * k);
  DeviceBuffer d_log_z = Zeros<float>(n_rows);
  const absl::Status status =
      TopKLogits(d_logits.as<float>(), n_rows, n_vocab, k, d_ids.as<int32_t>(),
                 d_values.as<float>(), d_log_z.as<float>(), stream);
  EXPECT_TRUE(status.ok()) << status;
  TopK out;
  out.ids = Download<int32_t>(d_ids, static_cast<size_t>(n_rows) * k);
  out.values = Download<float>(d_values, static_cast<size_t>(n_rows) * k);
  out.log_z = Download<float>(d_log_z, n_rows);
  return out;
}

// got == want: ids, values' bits, log_z within kLogZTolerance relative
// (absolute below 1; equal when not finite). One failure a row at most.
void ExpectSameTopK(const TopK& got, const TopK& want, int n_rows, int k,
                    const std::string& what) {
  ASSERT_EQ(got.ids.size(), want.ids.size()) << what;
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(r) * k + j;
      if (got.ids[at] != want.ids[at] ||
          Bits(got.values[at]) != Bits(want.values[at])) {
        ADD_FAILURE() << what << " row " << r << " rank " << j << ": got id "
                      << got.ids[at] << " value " << got.values[at]
                      << ", want id " << want.ids[at] << " value "
                      << want.values[at];
        break;
      }
    }
    const double want_z = want.log_z[r];
    if (std::isfinite(want_z)) {
      EXPECT_NEAR(got.log_z[r], want_z,
                  kLogZTolerance * std::max(1.0, std::abs(want_z)))
          << what << " row " << r;
    } else {
      EXPECT_EQ(got.log_z[r], want_z) << what << " row " << r;
    }
  }
}

void CheckAgainstHost(const std::vector<float>& logits, int n_rows, int n_vocab,
                      int k, const std::string& what) {
  ExpectSameTopK(DeviceTopK(logits, n_rows, n_vocab, k),
                 HostTopK(logits, n_rows, n_vocab, k), n_rows, k, what);
}

TEST(TopKGpuTest, RandomRowsMatchTheHost) {
  const int kRowCounts[] = {1, 2, 7, 33, 64};
  int trial = 0;
  for (int n_vocab : {1, 50, 1000, 4099, 49152, 128256, 262144}) {
    for (int k : kKs) {
      if (k > n_vocab) continue;
      const int n_rows = kRowCounts[trial % 5];
      ++trial;
      const std::vector<float> logits = RandomFloats(
          static_cast<size_t>(n_rows) * n_vocab, 100 + trial, 3.0f);
      CheckAgainstHost(logits, n_rows, n_vocab, k,
                       "n_vocab " + std::to_string(n_vocab) + " k " +
                           std::to_string(k) + " rows " +
                           std::to_string(n_rows));
    }
  }
}

// Row `pattern` of n: ties, signed zeros, infinities, extremes.
std::vector<float> TiedRow(int pattern, int n, std::mt19937& rng) {
  constexpr float kInf = INFINITY;
  std::uniform_int_distribution<int> small(-2, 2);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(n);
  for (int i = 0; i < n; ++i) {
    const float u = unit(rng);
    const float sign = u < 0.5f ? -1.0f : 1.0f;
    float v;
    switch (pattern) {
      case 0:  // a few integers
        v = static_cast<float>(small(rng));
        break;
      case 1:  // all equal
        v = 1.5f;
        break;
      case 2:  // +0.0 and -0.0
        v = sign * 0.0f;
        break;
      case 3:  // mostly -inf, then small integers and signed zeros
        v = u < 0.95f ? -kInf : (u < 0.97f ? sign * 0.0f : small(rng));
        break;
      case 4:  // ten finite entries (fewer than most k): -inf ties by id
        v = i % (n / 10) == 3 ? static_cast<float>(small(rng)) : -kInf;
        break;
      case 5:  // all -inf: log_z -inf
        v = -kInf;
        break;
      case 6:  // two +inf among random values: log_z +inf
        v = i == n / 3 || i == n - 1 ? kInf : 3.0f * (u - 0.5f);
        break;
      case 7: {  // extremes, denormals, zeros
        const float kExtremes[] = {-FLT_MAX, -1.0f,   -1e-40f, -0.0f,  0.0f,
                                   1e-40f,   FLT_MIN, 1.0f,    FLT_MAX};
        v = kExtremes[small(rng) + 2 + 2 * (i % 3)];
        break;
      }
      case 8:  // normal values rounded to 0.1: ties at every level
        v = std::round(normal(rng) * 20.0f) / 10.0f;
        break;
      case 9:  // denormals only, both signs
        v = sign * static_cast<float>(small(rng) + 3) * 1e-45f;
        break;
      case 10:  // descending with the id
        v = -static_cast<float>(i);
        break;
      default:  // ascending with the id
        v = static_cast<float>(i);
        break;
    }
    row[i] = v;
  }
  return row;
}

TEST(TopKGpuTest, TiedRowsMatchTheHost) {
  constexpr int kPatterns = 12;
  std::mt19937 rng(7);
  for (int n_vocab : {1000, 49152, 128256}) {
    std::vector<float> logits;
    for (int p = 0; p < kPatterns; ++p) {
      const std::vector<float> row = TiedRow(p, n_vocab, rng);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    for (int k : kKs) {
      if (k > n_vocab) continue;
      CheckAgainstHost(logits, kPatterns, n_vocab, k,
                       "tied rows, n_vocab " + std::to_string(n_vocab) + " k " +
                           std::to_string(k));
    }
  }
}

// The launch recorded into a graph on a stream of its own and replayed.
TEST(TopKGpuTest, RunsCapturedInACudaGraph) {
  const int n_rows = 4, n_vocab = 49152, k = 50;
  const std::vector<float> logits = RandomFloats(n_rows * n_vocab, 3, 3.0f);
  DeviceBuffer d_logits = Upload(logits);
  DeviceBuffer d_ids = Zeros<int32_t>(n_rows * k);
  DeviceBuffer d_values = Zeros<float>(n_rows * k);
  DeviceBuffer d_log_z = Zeros<float>(n_rows);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  const absl::Status status =
      TopKLogits(d_logits.as<float>(), n_rows, n_vocab, k, d_ids.as<int32_t>(),
                 d_values.as<float>(), d_log_z.as<float>(), stream);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(status.ok()) << status;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  TopK got;
  got.ids = Download<int32_t>(d_ids, n_rows * k);
  got.values = Download<float>(d_values, n_rows * k);
  got.log_z = Download<float>(d_log_z, n_rows);
  ExpectSameTopK(got, HostTopK(logits, n_rows, n_vocab, k), n_rows, k, "graph");
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(TopKGpuTest, RejectsBadArguments) {
  const int n_vocab = 2000;
  DeviceBuffer d_logits = Zeros<float>(n_vocab);
  DeviceBuffer d_ids = Zeros<int32_t>(kMaxTopK);
  DeviceBuffer d_values = Zeros<float>(kMaxTopK);
  DeviceBuffer d_log_z = Upload(std::vector<float>{-7.0f});
  const float* logits = d_logits.as<float>();
  int32_t* ids = d_ids.as<int32_t>();
  float* values = d_values.as<float>();
  float* log_z = d_log_z.as<float>();
  const auto code = [](const absl::Status& s) { return s.code(); };
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(
      code(TopKLogits(logits, -1, n_vocab, 1, ids, values, log_z, nullptr)),
      kInvalid);
  EXPECT_EQ(code(TopKLogits(logits, 1, 0, 1, ids, values, log_z, nullptr)),
            kInvalid);
  EXPECT_EQ(
      code(TopKLogits(logits, 1, n_vocab, 0, ids, values, log_z, nullptr)),
      kInvalid);
  EXPECT_EQ(code(TopKLogits(logits, 1, 10, 11, ids, values, log_z, nullptr)),
            kInvalid);
  EXPECT_EQ(code(TopKLogits(logits, 1, n_vocab, kMaxTopK + 1, ids, values,
                            log_z, nullptr)),
            kInvalid);
  EXPECT_EQ(
      code(TopKLogits(nullptr, 1, n_vocab, 1, ids, values, log_z, nullptr)),
      kInvalid);
  EXPECT_EQ(
      code(TopKLogits(logits, 1, n_vocab, 1, nullptr, values, log_z, nullptr)),
      kInvalid);
  EXPECT_EQ(
      code(TopKLogits(logits, 1, n_vocab, 1, ids, nullptr, log_z, nullptr)),
      kInvalid);
  EXPECT_EQ(
      code(TopKLogits(logits, 1, n_vocab, 1, ids, values, nullptr, nullptr)),
      kInvalid);
  EXPECT_EQ(code(TopKLogits(logits, 0, n_vocab, 1, nullptr, nullptr, nullptr,
                            nullptr)),
            kInvalid);
  // No rows: nothing written. The largest k is accepted.
  EXPECT_TRUE(
      TopKLogits(logits, 0, n_vocab, 1, ids, values, log_z, nullptr).ok());
  EXPECT_EQ(Download<float>(d_log_z, 1)[0], -7.0f);
  EXPECT_TRUE(
      TopKLogits(logits, 1, n_vocab, kMaxTopK, ids, values, log_z, nullptr)
          .ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace braid::kernels::cuda
