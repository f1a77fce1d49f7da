#include "kernels/cpu/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {
namespace {

// Naive reference in double: full score row, softmax, weighted sum; K/V from
// fp16, the query and the softmax weights rounded to fp16 (as ggml does).
void ReferenceAttention(const AttentionShape& s, const float* q,
                        const int32_t* pos, int64_t n_tok, const uint16_t* k,
                        const uint16_t* v, float* out) {
  const int64_t group = s.n_head / s.n_kv_head;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* qh = q + (t * s.n_head + h) * s.head_dim;
      const int64_t kvh = h / group;
      std::vector<double> p(pos[t] + 1);
      double max = -1e300, sum = 0;
      for (int64_t j = 0; j <= pos[t]; ++j) {
        double d = 0;
        for (int64_t i = 0; i < s.head_dim; ++i) {
          d += Fp16ToFp32(Fp32ToFp16(qh[i])) *
               Fp16ToFp32(k[(j * s.n_kv_head + kvh) * s.head_dim + i]);
        }
        p[j] = d / std::sqrt(static_cast<double>(s.head_dim));
        max = std::max(max, p[j]);
      }
      for (double& e : p) sum += (e = std::exp(e - max));
      for (double& e : p)
        e = Fp16ToFp32(Fp32ToFp16(static_cast<float>(e / sum)));
      for (int64_t i = 0; i < s.head_dim; ++i) {
        double acc = 0;
        for (int64_t j = 0; j <= pos[t]; ++j) {
          acc += p[j] * Fp16ToFp32(v[(j * s.n_kv_head + kvh) * s.head_dim + i]);
        }
        out[(t * s.n_head + h) * s.head_dim + i] = acc;
      }
    }
  }
}

TEST(AttentionTest, MatchesReferenceWithGqaAndLongContext) {
  const AttentionShape s{6, 2, 16};
  const int64_t n_ctx = 300;  // Spans several score chunks.
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(n_ctx * s.n_kv_head * s.head_dim);
  std::vector<uint16_t> v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng) * 2.0f);
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  const int32_t pos[4] = {0, 1, 150, 299};
  std::vector<float> q(4 * s.n_head * s.head_dim);
  for (float& e : q) e = dist(rng);
  std::vector<float> out(q.size()), ref(q.size());
  ThreadPool pool(2);
  Attention(s, q.data(), pos, 4, k.data(), v.data(), out.data(), &pool);
  ReferenceAttention(s, q.data(), pos, 4, k.data(), v.data(), ref.data());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 1e-4) << i;
  // Position 0 attends only to entry 0: output equals V[0] of its kv head.
  for (int64_t h = 0; h < s.n_head; ++h) {
    const int64_t kvh = h / 3;
    for (int64_t i = 0; i < s.head_dim; ++i) {
      EXPECT_NEAR(out[h * s.head_dim + i], Fp16ToFp32(v[kvh * s.head_dim + i]),
                  1e-5);
    }
  }
}

// A one-token call (llama.cpp's ggml_vec_dot_f16 order) and a batched call
// (tinyBLAS order) differ only in rounding; the AVX2 and scalar paths agree to
// the bit in both.
TEST(AttentionTest, SingleAndBatchedAgreeAndPathsAreBitIdentical) {
  const AttentionShape s{4, 2, 64};
  const int64_t n_ctx = 90;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(n_ctx * s.n_kv_head * s.head_dim), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng));
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  const int64_t row = s.n_head * s.head_dim;
  std::vector<float> q(3 * row);
  for (float& e : q) e = dist(rng);
  const int32_t pos[3] = {70, 88, 89};
  struct Outputs {
    std::vector<float> batched, single;
  };
  auto run = [&](bool scalar) {
    SetForceScalarForTesting(scalar);
    Outputs o{std::vector<float>(q.size()), std::vector<float>(q.size())};
    Attention(s, q.data(), pos, 3, k.data(), v.data(), o.batched.data(),
              nullptr);
    for (int t = 0; t < 3; ++t) {
      Attention(s, q.data() + t * row, pos + t, 1, k.data(), v.data(),
                o.single.data() + t * row, nullptr);
    }
    SetForceScalarForTesting(false);
    return o;
  };
  const Outputs fast = run(false), slow = run(true);
  EXPECT_EQ(fast.batched, slow.batched);
  EXPECT_EQ(fast.single, slow.single);
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_NEAR(fast.single[i], fast.batched[i], 1e-5) << i;
  }
}

}  // namespace
}  // namespace braid::kernels::cpu
