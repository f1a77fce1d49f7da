#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/fp16.h"

namespace braid::kernels::cpu {
namespace {

constexpr int64_t kAttentionChunk = 128;
constexpr int64_t kMaxHeadDim = 256;

// One query head against keys 0..n_keys-1.
void AttendOne(const float* q, int64_t n_keys, const uint16_t* k,
               const uint16_t* v, int64_t kv_stride, int64_t head_dim,
               float scale, float* out) {
  // Like ggml's F16 K.Q product, the query is rounded to fp16 first.
  float q16[kMaxHeadDim];
  for (int64_t i = 0; i < head_dim; ++i) q16[i] = Fp16ToFp32(Fp32ToFp16(q[i]));
  float scores[kAttentionChunk];
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j0 = 0; j0 < n_keys; j0 += kAttentionChunk) {
    const int64_t len = std::min(kAttentionChunk, n_keys - j0);
    float chunk_max = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      scores[j] = DotF16F32(k + (j0 + j) * kv_stride, q16, head_dim) * scale;
      chunk_max = std::max(chunk_max, scores[j]);
    }
    const float new_max = std::max(running_max, chunk_max);
    const float correction = std::exp(running_max - new_max);
    if (correction != 1.0f) {
      Scale(correction, out, head_dim);
      running_sum *= correction;
    }
    for (int64_t j = 0; j < len; ++j) {
      const float p = std::exp(scores[j] - new_max);
      running_sum += p;
      AxpyF16(p, v + (j0 + j) * kv_stride, out, head_dim);
    }
    running_max = new_max;
  }
  if (running_sum > 0.0f) Scale(1.0f / running_sum, out, head_dim);
}

}  // namespace

void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool) {
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  auto task = [&](int64_t i) {
    const int64_t t = i / shape.n_head;
    const int64_t h = i % shape.n_head;
    const int64_t kv_off = (h / group) * shape.head_dim;
    const int64_t off = (t * shape.n_head + h) * shape.head_dim;
    AttendOne(q + off, static_cast<int64_t>(q_positions[t]) + 1, k + kv_off,
              v + kv_off, kv_stride, shape.head_dim, scale, out + off);
  };
  const int64_t n = n_tok * shape.n_head;
  if (pool != nullptr) {
    pool->ParallelFor(n, task);
  } else {
    for (int64_t i = 0; i < n; ++i) task(i);
  }
}

}  // namespace braid::kernels::cpu
