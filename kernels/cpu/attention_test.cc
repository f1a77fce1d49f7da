#include "kernels/cpu/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {
namespace {

// Naive reference: full score row, softmax, weighted sum; K/V from fp16 and the
// query rounded to fp16 (as the kernel and ggml do).
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
      for (int64_t i = 0; i < s.head_dim; ++i) {
        double acc = 0;
        for (int64_t j = 0; j <= pos[t]; ++j) {
          acc += p[j] * Fp16ToFp32(v[(j * s.n_kv_head + kvh) * s.head_dim + i]);
        }
        out[(t * s.n_head + h) * s.head_dim + i] = acc / sum;
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

}  // namespace
}  // namespace braid::kernels::cpu
