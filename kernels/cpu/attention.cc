#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/cpu_features.h"
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
// (slot = key rank % slots); rows >= used were never written and stand for
// zeros. Sums them into out[dim] in ggml's order: for 64 slots (4
// accumulators x 16 lanes) accumulator 0 += 2, 1 += 3, 0 += 1; then the 16
// lanes as _mm512_reduce_add_ps (ggml_reduce.h). Adding a zero row is
// skipped and adding into one is a copy: the same values (no sum here can be
// -0, since every row starts at +0).
void ReduceSlots(float* acc, int64_t slots, int64_t used, int64_t dim,
                 float* out) {
  bool live[4 * kLanes];
  for (int64_t s = 0; s < slots; ++s) live[s] = s < used;
  auto add_row = [&](int64_t dst, int64_t src) {
    if (!live[src]) return;
    if (live[dst]) {
      AddF32(acc + src * dim, acc + dst * dim, dim);
    } else {
      std::memcpy(acc + dst * dim, acc + src * dim, dim * sizeof(float));
      live[dst] = true;
    }
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
  if (live[0]) {
    std::memcpy(out, acc, dim * sizeof(float));
  } else {
    std::memset(out, 0, dim * sizeof(float));
  }
}

// Per-thread buffers; they only grow (to powers of two), so steady-state
// calls allocate nothing.
template <typename T>
T* Scratch(std::vector<T>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) {
    int64_t cap = 256;
    while (cap < n) cap *= 2;
    buf.resize(cap);
  }
  return buf.data();
}

// Heads of one query handled together (sharing their K and V rows).
constexpr int kMaxGroup = 8;

// Attention of g query heads (q[h] -> out[h]) of one query over the n
// entries it sees, in rank order (k_rows[i], v_rows[i]: entry i's rows of the
// heads' KV head). Rank, not context index, picks the score lane and the
// accumulator slot, so a sequence gets the same bits whatever else shares
// its context (branches) or lies beyond its mask.
void AttendRows(const float* const* q, float* const* out, int g,
                const uint16_t* const* k_rows, const uint16_t* const* v_rows,
                int64_t n, int64_t head_dim, float scale,
                KernelChoice kernels) {
  thread_local std::vector<float> score_buf, acc_buf;
  // The queries as fp16 values (ggml converts them to the K cache's type).
  float q16[kMaxGroup][kMaxHeadDim];
  const float* q16p[kMaxGroup];
  for (int h = 0; h < g; ++h) {
    RoundToFp16Row(q[h], q16[h], head_dim);
    q16p[h] = q16[h];
  }
  // Scores padded to whole lanes with -inf, i.e. weight exactly 0.
  const int64_t n_pad = (n + kLanes - 1) / kLanes * kLanes;
  float* scores = Scratch(score_buf, g * n_pad);
  if (!(UseAvx512() &&
        internal::ScoresF16Avx512(k_rows, n, q16p, g, head_dim, kernels.kq_gemm,
                                  scores, n_pad))) {
    for (int h = 0; h < g; ++h) {
      for (int64_t j = 0; j < n; j += kLanes) {
        const int64_t count = std::min(kLanes, n - j);
        float* dst = scores + h * n_pad + j;
        if (kernels.kq_gemm) {
          DotF16F32GemmRows(k_rows + j, count, q16[h], head_dim, dst);
        } else {
          DotF16F32VecRows(k_rows + j, count, q16[h], head_dim, dst);
        }
      }
    }
  }
  for (int h = 0; h < g; ++h) {
    float* row = scores + h * n_pad;
    float max = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      row[j] *= scale;
      max = std::max(max, row[j]);
    }
    std::fill(row + n, row + n_pad, -INFINITY);
    const double sum = ExpShiftedSum(row, max, row, n_pad);
    const float inv_sum = static_cast<float>(1.0 / sum);
    // The weights, rounded to fp16 as ggml stores them.
    for (int64_t j = 0; j < n; ++j) row[j] *= inv_sum;
    RoundToFp16Row(row, row, n);
  }
  // Weighted V sums, one partial row per accumulator lane (slot).
  const int64_t slots = kernels.kqv_gemm ? kLanes : 4 * kLanes;
  const int64_t used = std::min(n, slots);
  const int64_t ld_acc = slots * head_dim;
  float* acc = Scratch(acc_buf, g * ld_acc);
  if (!(UseAvx512() &&
        internal::SlotSumsF16Avx512(v_rows, n, scores, n_pad, g, head_dim,
                                    slots, acc, ld_acc))) {
    for (int h = 0; h < g; ++h) {
      float* acc_h = acc + h * ld_acc;
      std::memset(acc_h, 0, used * head_dim * sizeof(float));
      float* dst[kLanes];
      for (int64_t j = 0; j < n; j += kLanes) {
        const int64_t count = std::min(kLanes, n - j);
        for (int64_t r = 0; r < count; ++r) {
          dst[r] = acc_h + ((j + r) % slots) * head_dim;
        }
        AxpyF16Rows(scores + h * n_pad + j, v_rows + j, dst, count, head_dim);
      }
    }
  }
  for (int h = 0; h < g; ++h) {
    ReduceSlots(acc + h * ld_acc, slots, used, head_dim, out[h]);
  }
}

// tinyBLAS only serves batches of 2+ and declines a K·q whose inner size
// (head_dim) is not a multiple of its 16 lanes or a V^T·w with head_dim rows
// not a multiple of 4; llama.cpp then falls back to ggml_vec_dot_f16.
KernelChoice ChooseKernels(int64_t n_tok, int64_t head_dim) {
  return KernelChoice{n_tok > 1 && head_dim % kLanes == 0,
                      n_tok > 1 && head_dim % 4 == 0};
}

// How one call is split into tasks: (query token, KV head, group of that KV
// head's query heads). Heads are grouped to share K/V rows unless that would
// leave too few tasks to keep the pool busy.
struct TaskSplit {
  int64_t group = 0;       // query heads per KV head
  int64_t group_size = 0;  // heads per task
  int64_t per_kv = 0;      // tasks per (token, KV head)
  int64_t tasks = 0;

  TaskSplit(const AttentionShape& shape, int64_t n_tok, ThreadPool* pool) {
    group = shape.n_head / shape.n_kv_head;
    group_size = std::min<int64_t>(group, kMaxGroup);
    const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
    if (n_tok * shape.n_kv_head * ((group + group_size - 1) / group_size) <
        2 * threads) {
      group_size = 1;
    }
    per_kv = (group + group_size - 1) / group_size;
    tasks = n_tok * shape.n_kv_head * per_kv;
  }
};

// Runs task(t, kv_head, first_head, num_heads) for every task of the split.
template <typename Task>
void RunTasks(const AttentionShape& shape, const TaskSplit& split,
              ThreadPool* pool, Task task) {
  auto run = [&](int64_t i) {
    const int64_t sub = i % split.per_kv;
    const int64_t kvh = (i / split.per_kv) % shape.n_kv_head;
    const int64_t t = i / (split.per_kv * shape.n_kv_head);
    const int64_t h0 = kvh * split.group + sub * split.group_size;
    const int g = static_cast<int>(
        std::min(split.group_size, (kvh + 1) * split.group - h0));
    task(t, kvh, h0, g);
  };
  if (pool != nullptr) {
    pool->ParallelFor(split.tasks, run);
  } else {
    for (int64_t i = 0; i < split.tasks; ++i) run(i);
  }
}

// The q and out rows of heads [h0, h0 + g) of query token t.
struct HeadRows {
  const float* q[kMaxGroup];
  float* out[kMaxGroup];
  HeadRows(const AttentionShape& shape, const float* q_all, float* out_all,
           int64_t t, int64_t h0, int g) {
    for (int h = 0; h < g; ++h) {
      const int64_t off = (t * shape.n_head + h0 + h) * shape.head_dim;
      q[h] = q_all + off;
      out[h] = out_all + off;
    }
  }
};

}  // namespace

void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool) {
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const KernelChoice kernels = ChooseKernels(n_tok, shape.head_dim);
  const TaskSplit split(shape, n_tok, pool);
  RunTasks(shape, split, pool, [&](int64_t t, int64_t kvh, int64_t h0, int g) {
    thread_local std::vector<const uint16_t*> k_buf, v_buf;
    const int64_t n = static_cast<int64_t>(q_positions[t]) + 1;
    const uint16_t** k_rows = Scratch(k_buf, n);
    const uint16_t** v_rows = Scratch(v_buf, n);
    const int64_t kv_off = kvh * shape.head_dim;
    for (int64_t j = 0; j < n; ++j) {
      k_rows[j] = k + j * kv_stride + kv_off;
      v_rows[j] = v + j * kv_stride + kv_off;
    }
    const HeadRows rows(shape, q, out, t, h0, g);
    AttendRows(rows.q, rows.out, g, k_rows, v_rows, n, shape.head_dim, scale,
               kernels);
  });
}

void PagedAttention(const AttentionShape& shape, const PagedKvLayer& kv,
                    const float* q, const KvEntryMeta* q_meta,
                    const PagedAttentionSeq* seqs, const int32_t* token_seq,
                    int64_t n_tok, float* out, ThreadPool* pool) {
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const int64_t bs = kv.block_size;
  int shift = -1;
  if ((bs & (bs - 1)) == 0) shift = __builtin_ctzll(static_cast<uint64_t>(bs));
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const TaskSplit split(shape, n_tok, pool);
  RunTasks(shape, split, pool, [&](int64_t t, int64_t kvh, int64_t h0, int g) {
    thread_local std::vector<const uint16_t*> k_buf, v_buf;
    const PagedAttentionSeq& seq = seqs[token_seq[t]];
    const int32_t* table = seq.block_table;
    // Pool index of context entry j (shifts for the usual power-of-two
    // block sizes).
    auto slot = [&](int64_t j) {
      if (shift >= 0) {
        return (int64_t{table[j >> shift]} << shift) | (j & (bs - 1));
      }
      return table[j / bs] * bs + j % bs;
    };
    const KvEntryMeta qm = q_meta[t];
    auto visible = [&](int64_t e, int64_t j) {
      KvEntryMeta m{0, static_cast<int32_t>(j)};
      if (kv.meta != nullptr) m = kv.meta[e];
      if (m.stream == qm.stream) return m.y <= qm.y;
      if (m.y >= qm.y) return false;
      for (int64_t s = 0; s < seq.num_visible_streams; ++s) {
        if (seq.visible_streams[s] == m.stream) return true;
      }
      return false;
    };
    // The visible entries in context order.
    const uint16_t** k_rows = Scratch(k_buf, seq.num_ctx);
    const uint16_t** v_rows = Scratch(v_buf, seq.num_ctx);
    const uint16_t* kh = kv.k + kvh * shape.head_dim;
    const uint16_t* vh = kv.v + kvh * shape.head_dim;
    int64_t n = 0;
    for (int64_t j = 0; j < seq.num_ctx; ++j) {
      const int64_t e = slot(j);
      if (!visible(e, j)) continue;
      k_rows[n] = kh + e * kv_stride;
      v_rows[n++] = vh + e * kv_stride;
    }
    const HeadRows rows(shape, q, out, t, h0, g);
    AttendRows(rows.q, rows.out, g, k_rows, v_rows, n, shape.head_dim, scale,
               ChooseKernels(seq.num_tokens, shape.head_dim));
  });
}

}  // namespace braid::kernels::cpu
