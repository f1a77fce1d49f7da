#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/vec_math.h"

namespace braid::kernels::cpu {
namespace {

constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kLanes = 16;  // ggml's AVX-512 vector width in floats.

// Which of llama.cpp's kernels computes each product (see dot.h).
struct KernelChoice {
  bool kq_gemm;   // K·q in tinyBLAS (else ggml_vec_dot_f16)
  bool kqv_gemm;  // V^T·weights in tinyBLAS (else ggml_vec_dot_f16)
};

// acc rows [slots][dim] hold the partial sums of ggml's accumulator lanes
// (slot = key index % slots); sums them into out[dim] in ggml's order: for
// 64 slots (4 accumulators x 16 lanes) accumulator 0 += 2, 1 += 3, 0 += 1;
// then the 16 lanes as _mm512_reduce_add_ps (ggml_reduce.h).
void ReduceSlots(float* acc, int64_t slots, int64_t dim, float* out) {
  auto add_row = [&](int64_t dst, int64_t src) {
    AddF32(acc + src * dim, acc + dst * dim, dim);
  };
  if (slots == 4 * kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      add_row(l, l + 2 * kLanes);
      add_row(l + kLanes, l + 3 * kLanes);
    }
    for (int64_t l = 0; l < kLanes; ++l) add_row(l, l + kLanes);
  }
  for (int64_t l = 0; l < 8; ++l) add_row(l, l + 8);
  for (int64_t l = 0; l < 4; ++l) add_row(l, l + 4);
  add_row(0, 2);
  add_row(1, 3);
  add_row(0, 1);
  std::memcpy(out, acc, dim * sizeof(float));
}

// One query head against keys 0..n_keys-1.
void AttendOne(const float* q, int64_t n_keys, const uint16_t* k,
               const uint16_t* v, int64_t kv_stride, int64_t head_dim,
               float scale, KernelChoice kernels, float* out) {
  thread_local std::vector<float> scores, acc;
  // The query as fp16 values (ggml converts it to the K cache's type).
  float q16[kMaxHeadDim];
  for (int64_t i = 0; i < head_dim; ++i) q16[i] = Fp16ToFp32(Fp32ToFp16(q[i]));
  // Scores padded to whole lanes with -inf, i.e. weight exactly 0.
  const int64_t n_pad = (n_keys + kLanes - 1) / kLanes * kLanes;
  scores.resize(n_pad);
  float max = -INFINITY;
  for (int64_t j = 0; j < n_keys; ++j) {
    const uint16_t* kj = k + j * kv_stride;
    const float dot = kernels.kq_gemm ? DotF16F32Gemm(kj, q16, head_dim)
                                      : DotF16F32Vec(kj, q16, head_dim);
    scores[j] = dot * scale;
    max = std::max(max, scores[j]);
  }
  std::fill(scores.begin() + n_keys, scores.end(), -INFINITY);
  const double sum = ExpShiftedSum(scores.data(), max, scores.data(), n_pad);
  const float inv_sum = static_cast<float>(1.0 / sum);
  // Weighted V sum, one partial row per accumulator lane.
  const int64_t slots = kernels.kqv_gemm ? kLanes : 4 * kLanes;
  acc.resize(slots * head_dim);
  std::memset(acc.data(), 0, acc.size() * sizeof(float));
  for (int64_t j = 0; j < n_keys; ++j) {
    const float p = Fp16ToFp32(Fp32ToFp16(scores[j] * inv_sum));
    if (p == 0.0f) continue;  // Adds exactly nothing.
    AxpyF16(p, v + j * kv_stride, acc.data() + (j % slots) * head_dim,
            head_dim);
  }
  ReduceSlots(acc.data(), slots, head_dim, out);
}

}  // namespace

void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool) {
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  // tinyBLAS only serves batches of 2+ and declines a K·q whose inner size
  // (head_dim) is not a multiple of its 16 lanes or a V^T·w with head_dim rows
  // not a multiple of 4; llama.cpp then falls back to ggml_vec_dot_f16.
  const KernelChoice kernels{n_tok > 1 && shape.head_dim % kLanes == 0,
                             n_tok > 1 && shape.head_dim % 4 == 0};
  auto task = [&](int64_t i) {
    const int64_t t = i / shape.n_head;
    const int64_t h = i % shape.n_head;
    const int64_t kv_off = (h / group) * shape.head_dim;
    const int64_t off = (t * shape.n_head + h) * shape.head_dim;
    AttendOne(q + off, static_cast<int64_t>(q_positions[t]) + 1, k + kv_off,
              v + kv_off, kv_stride, shape.head_dim, scale, kernels, out + off);
  };
  const int64_t n = n_tok * shape.n_head;
  if (pool != nullptr) {
    pool->ParallelFor(n, task);
  } else {
    for (int64_t i = 0; i < n; ++i) task(i);
  }
}

}  // namespace braid::kernels::cpu
