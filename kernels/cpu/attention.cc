#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
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

// Thread-local score and accumulator rows; they only grow (to powers of two),
// so steady-state calls allocate nothing.
float* ScratchFloats(std::vector<float>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) {
    int64_t cap = 256;
    while (cap < n) cap *= 2;
    buf.resize(cap);
  }
  return buf.data();
}

// One query head against context entries 0..n_keys-1. at(j) gives entry j's
// K and V rows (this head's slice); visible(j) says whether the query sees it.
template <typename EntryAt, typename Visible>
void AttendOne(const float* q, int64_t n_keys, EntryAt at, Visible visible,
               int64_t head_dim, float scale, KernelChoice kernels,
               float* out) {
  thread_local std::vector<float> score_buf, acc_buf;
  // The query as fp16 values (ggml converts it to the K cache's type).
  float q16[kMaxHeadDim];
  RoundToFp16Row(q, q16, head_dim);
  // Scores padded to whole lanes with -inf, i.e. weight exactly 0.
  const int64_t n_pad = (n_keys + kLanes - 1) / kLanes * kLanes;
  float* scores = ScratchFloats(score_buf, n_pad);
  // Visible keys go to the dot kernels in groups; invisible ones score -inf.
  constexpr int kGroup = 16;
  const uint16_t* rows[kGroup];
  int64_t idx[kGroup];
  float dots[kGroup];
  int count = 0;
  float max = -INFINITY;
  auto flush = [&] {
    if (kernels.kq_gemm) {
      DotF16F32GemmRows(rows, count, q16, head_dim, dots);
    } else {
      DotF16F32VecRows(rows, count, q16, head_dim, dots);
    }
    for (int r = 0; r < count; ++r) {
      scores[idx[r]] = dots[r] * scale;
      max = std::max(max, scores[idx[r]]);
    }
    count = 0;
  };
  for (int64_t j = 0; j < n_keys; ++j) {
    if (!visible(j)) {
      scores[j] = -INFINITY;
      continue;
    }
    rows[count] = at(j).first;
    idx[count++] = j;
    if (count == kGroup) flush();
  }
  if (count > 0) flush();
  std::fill(scores + n_keys, scores + n_pad, -INFINITY);
  const double sum = ExpShiftedSum(scores, max, scores, n_pad);
  const float inv_sum = static_cast<float>(1.0 / sum);
  // The weights, rounded to fp16 as ggml stores them.
  for (int64_t j = 0; j < n_keys; ++j) scores[j] *= inv_sum;
  RoundToFp16Row(scores, scores, n_keys);
  // Weighted V sum, one partial row per accumulator lane.
  const int64_t slots = kernels.kqv_gemm ? kLanes : 4 * kLanes;
  float* acc = ScratchFloats(acc_buf, slots * head_dim);
  std::memset(acc, 0, slots * head_dim * sizeof(float));
  float* dst[kGroup];
  for (int64_t j = 0; j < n_keys; ++j) {
    const float p = scores[j];
    if (p == 0.0f) continue;  // Adds exactly nothing (and masked entries).
    dots[count] = p;
    rows[count] = at(j).second;
    dst[count++] = acc + (j % slots) * head_dim;
    if (count == kGroup) {
      AxpyF16Rows(dots, rows, dst, count, head_dim);
      count = 0;
    }
  }
  if (count > 0) AxpyF16Rows(dots, rows, dst, count, head_dim);
  ReduceSlots(acc, slots, head_dim, out);
}

// tinyBLAS only serves batches of 2+ and declines a K·q whose inner size
// (head_dim) is not a multiple of its 16 lanes or a V^T·w with head_dim rows
// not a multiple of 4; llama.cpp then falls back to ggml_vec_dot_f16.
KernelChoice ChooseKernels(int64_t n_tok, int64_t head_dim) {
  return KernelChoice{n_tok > 1 && head_dim % kLanes == 0,
                      n_tok > 1 && head_dim % 4 == 0};
}

}  // namespace

void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool) {
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const KernelChoice kernels = ChooseKernels(n_tok, shape.head_dim);
  auto task = [&](int64_t i) {
    const int64_t t = i / shape.n_head;
    const int64_t h = i % shape.n_head;
    const int64_t kv_off = (h / group) * shape.head_dim;
    const int64_t off = (t * shape.n_head + h) * shape.head_dim;
    const uint16_t* kh = k + kv_off;
    const uint16_t* vh = v + kv_off;
    auto at = [&](int64_t j) {
      return std::make_pair(kh + j * kv_stride, vh + j * kv_stride);
    };
    AttendOne(
        q + off, static_cast<int64_t>(q_positions[t]) + 1, at,
        [](int64_t) { return true; }, shape.head_dim, scale, kernels,
        out + off);
  };
  const int64_t n = n_tok * shape.n_head;
  if (pool != nullptr) {
    pool->ParallelFor(n, task);
  } else {
    for (int64_t i = 0; i < n; ++i) task(i);
  }
}

void PagedAttention(const AttentionShape& shape, const PagedKvLayer& kv,
                    const float* q, const KvEntryMeta* q_meta,
                    const PagedAttentionSeq* seqs, const int32_t* token_seq,
                    int64_t n_tok, float* out, ThreadPool* pool) {
  const int64_t group = shape.n_head / shape.n_kv_head;
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const int64_t bs = kv.block_size;
  int shift = -1;
  if ((bs & (bs - 1)) == 0) shift = __builtin_ctzll(static_cast<uint64_t>(bs));
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  auto task = [&](int64_t i) {
    const int64_t t = i / shape.n_head;
    const int64_t h = i % shape.n_head;
    const PagedAttentionSeq& seq = seqs[token_seq[t]];
    const int32_t* table = seq.block_table;
    const int64_t kv_off = (h / group) * shape.head_dim;
    const int64_t off = (t * shape.n_head + h) * shape.head_dim;
    const uint16_t* kh = kv.k + kv_off;
    const uint16_t* vh = kv.v + kv_off;
    // Pool index of context entry j (shifts for the usual power-of-two
    // block sizes).
    auto slot = [&](int64_t j) {
      if (shift >= 0) {
        return (int64_t{table[j >> shift]} << shift) | (j & (bs - 1));
      }
      return table[j / bs] * bs + j % bs;
    };
    auto at = [&](int64_t j) {
      const int64_t e = slot(j) * kv_stride;
      return std::make_pair(kh + e, vh + e);
    };
    const KvEntryMeta qm = q_meta[t];
    auto visible = [&](int64_t j) {
      KvEntryMeta m{0, static_cast<int32_t>(j)};
      if (kv.meta != nullptr) m = kv.meta[slot(j)];
      if (m.stream == qm.stream) return m.y <= qm.y;
      if (m.y >= qm.y) return false;
      for (int64_t s = 0; s < seq.num_visible_streams; ++s) {
        if (seq.visible_streams[s] == m.stream) return true;
      }
      return false;
    };
    AttendOne(q + off, seq.num_ctx, at, visible, shape.head_dim, scale,
              ChooseKernels(seq.num_tokens, shape.head_dim), out + off);
  };
  const int64_t n = n_tok * shape.n_head;
  if (pool != nullptr) {
    pool->ParallelFor(n, task);
  } else {
    for (int64_t i = 0; i < n; ++i) task(i);
  }
}

}  // namespace braid::kernels::cpu
