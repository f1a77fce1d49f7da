#include "kernels/cpu/attention/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention/attention_kernels.h"
#include "kernels/cpu/attention/attention_paged.h"
#include "kernels/cpu/attention/attention_tasks.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant/dot.h"
#include "kernels/cpu/vec_math.h"

namespace braid::kernels::cpu {
namespace {

using internal::ChooseKernels;
using internal::KernelChoice;
using internal::kLanes;
using internal::kMaxRows;
using internal::PagedEntries;
using internal::SoftmaxRow;
using internal::TaskSplit;
using internal::TokenRun;

constexpr int64_t kMaxHeadDim = 256;
// One-token sequences over at least this many entries take PagedAttention's
// long-context phases (attention_long.cc).
constexpr int64_t kSplitMinEntries = 1024;

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

// The entries each token of a run sees (PagedAttention), as pool entries,
// the same for all the run's tasks (KV heads): the run's last token's, the
// length of a prefix of them for each token that sees one, and the others'
// own lists ("alone").
struct RunView {
  int64_t n_last = 0;
  int num_prefix = 0, num_alone = 0;
  int64_t prefix_t[kMaxRows], prefix_n[kMaxRows];
  int64_t alone_t[kMaxRows], alone_at[kMaxRows], alone_n[kMaxRows];
};

// A RunView with its entry lists (the last token's, then the alone
// tokens'), and which run of which pass it is (PagedKvLayer::view_pass).
struct ViewSlot {
  uint64_t pass = 0;
  int64_t first = -1, count = 0;
  RunView view;
  std::vector<int32_t> entries;
};

// Runs of a call whose views a thread keeps across a pass
// (PagedKvLayer::view_pass), each for up to the reserved context's entries
// (one-token runs; others are built per call).
constexpr int64_t kViewSlots = 64;

// A thread's scratch for its attention tasks (ReserveAttentionScratch).
struct ThreadScratch {
  std::vector<const uint16_t*> k_rows, v_rows;  // a task's visible entries
  std::vector<KvEntryMeta> metas;
  std::vector<int32_t> keys;
  ViewSlot view;                 // calls without a view_pass
  std::vector<ViewSlot> passes;  // with one: by run index
  std::vector<float> scores, acc;
};
thread_local ThreadScratch tls;

// A score row of n dots (ld >= pad16(n) floats) -> ggml's softmax weights of
// scale * dots, rounded to fp16 as ggml stores them; the rest of the row 0.
// row[j] *= scale for j < n; returns the largest (any order gives the same
// maximum, signed zeros aside, which subtract alike in the exponent).
__attribute__((target("avx2"))) float ScaleMaxAvx2(float* row, int64_t n,
                                                   float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(row + j), s);
    _mm256_storeu_ps(row + j, v);
    m = _mm256_max_ps(m, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float max = lanes[0];
  for (int l = 1; l < 8; ++l) max = std::max(max, lanes[l]);
  for (; j < n; ++j) {
    row[j] *= scale;
    max = std::max(max, row[j]);
  }
  return max;
}

__attribute__((target("avx2"))) void ScaleAvx2(float* row, int64_t n,
                                               float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), s));
  }
  for (; j < n; ++j) row[j] *= scale;
}

// Query rows of one KV head that see prefixes of one list of entries: row i
// (q[i] -> out[i]) sees entries [0, n[i]) of it, in rank order.
struct QueryRows {
  const float* q[kMaxRows];
  float* out[kMaxRows];
  int64_t n[kMaxRows];
  int count = 0;
};

// Attention of `rows` over the entries (k_rows[j], v_rows[j]), j < n, where
// n = max of rows.n. Rank, not context index, picks the score lane and the
// accumulator slot, so a query gets the same bits whatever else shares its
// context (branches) or lies beyond its mask; the rows' shared scores beyond
// a row's own n weigh exactly 0 and add nothing.
void AttendRows(const QueryRows& rows, const uint16_t* const* k_rows,
                const uint16_t* const* v_rows, int64_t head_dim, float scale,
                float softcap, KernelChoice kernels) {
  const int g = rows.count;
  int64_t n = 0;
  for (int i = 0; i < g; ++i) n = std::max(n, rows.n[i]);
  // The queries as fp16 values (ggml converts them to the K cache's type).
  float q16[kMaxRows][kMaxHeadDim];
  const float* q16p[kMaxRows];
  for (int i = 0; i < g; ++i) {
    RoundToFp16Row(rows.q[i], q16[i], head_dim);
    q16p[i] = q16[i];
  }
  // Score rows, each padded to whole lanes with -inf (weight exactly 0).
  const int64_t ld = (n + kLanes - 1) / kLanes * kLanes;
  float* scores = Scratch(tls.scores, g * ld);
  if (!(UseAvx512() &&
        internal::ScoresF16Avx512(k_rows, v_rows, n, q16p, g, head_dim,
                                  kernels.kq_gemm, scores, ld)) &&
      !(UseAvx2() && internal::ScoresF16Avx2(k_rows, n, q16p, g, head_dim,
                                             kernels.kq_gemm, scores, ld))) {
    for (int i = 0; i < g; ++i) {
      for (int64_t j = 0; j < rows.n[i]; j += kLanes) {
        const int64_t count = std::min(kLanes, rows.n[i] - j);
        float* dst = scores + i * ld + j;
        if (kernels.kq_gemm) {
          DotF16F32GemmRows(k_rows + j, count, q16[i], head_dim, dst);
        } else {
          DotF16F32VecRows(k_rows + j, count, q16[i], head_dim, dst);
        }
      }
    }
  }
  for (int i = 0; i < g; ++i) {
    if (softcap > 0) SoftcapInPlace(scores + i * ld, rows.n[i], softcap);
    SoftmaxRow(scores + i * ld, rows.n[i], ld, scale);
  }
  // Weighted V sums, one partial row per accumulator lane (slot), reduced
  // in ggml's order.
  const int64_t slots = kernels.kqv_gemm ? kLanes : 4 * kLanes;
  if (UseAvx512() && internal::WeightedSumF16Avx512(
                         v_rows, n, scores, ld, g, head_dim, slots, rows.out)) {
    return;
  }
  if (UseAvx2() && internal::WeightedSumF16Avx2(v_rows, n, scores, ld, g,
                                                head_dim, slots, rows.out)) {
    return;
  }
  const int64_t used = std::min(n, slots);
  const int64_t ld_acc = slots * head_dim;
  float* acc = Scratch(tls.acc, ld_acc);
  for (int i = 0; i < g; ++i) {
    std::memset(acc, 0, used * head_dim * sizeof(float));
    float* dst[kLanes];
    for (int64_t j = 0; j < n; j += kLanes) {
      const int64_t count = std::min(kLanes, n - j);
      for (int64_t r = 0; r < count; ++r) {
        dst[r] = acc + ((j + r) % slots) * head_dim;
      }
      AxpyF16Rows(scores + i * ld + j, v_rows + j, dst, count, head_dim);
    }
    ReduceSlots(acc, slots, used, head_dim, rows.out[i]);
  }
}

// Adds heads [h0, h0 + g) of query token t, seeing n entries, to rows.
void AddRows(const AttentionShape& shape, const float* q, float* out, int64_t t,
             int64_t h0, int g, int64_t n, QueryRows* rows) {
  for (int h = 0; h < g; ++h) {
    const int64_t off = (t * shape.n_head + h0 + h) * shape.head_dim;
    rows->q[rows->count] = q + off;
    rows->out[rows->count] = out + off;
    rows->n[rows->count++] = n;
  }
}

// A one-token sequence over a long context (a decode step, a one-token
// prompt chunk).
bool LongOne(const PagedAttentionSeq& seq) {
  return seq.num_tokens == 1 && seq.num_ctx >= kSplitMinEntries;
}

// Whether a call's long one-token sequences take the long-context phases:
// where the kernels have them (AVX-512, head_dim 64 or 128, a KV head's
// query heads in one task), with two or more threads, and only while the
// call's sequences are too few to keep the pool busy as whole tasks (one
// per KV head): the split costs three more parallel sections, which a busy
// call (say, decoding streams beside a long prompt's one-token chunk) does
// not win back.
bool UseLongSplit(const AttentionShape& shape, const PagedAttentionSeq* seqs,
                  const int32_t* token_seq, int64_t n_tok, ThreadPool* pool) {
  if (pool == nullptr || pool->num_threads() <= 1 || !UseAvx512() ||
      !(shape.head_dim == 64 || shape.head_dim == 128) ||
      shape.n_head / shape.n_kv_head > kMaxRows) {
    return false;
  }
  int64_t num_long = 0, num_seqs = 0;
  for (int64_t t = 0; t < n_tok; ++t) {
    num_long += LongOne(seqs[token_seq[t]]);
    num_seqs += t == 0 || token_seq[t] != token_seq[t - 1];
  }
  return num_long > 0 && num_seqs * shape.n_kv_head < 4 * pool->num_threads();
}

// The entries each token of `run` (of `seq`) sees, into slot (RunView).
void BuildRunView(const AttentionShape& shape, const PagedEntries& entries,
                  const PagedAttentionSeq& seq, const KvEntryMeta* q_meta,
                  const TokenRun& run, ViewSlot& slot) {
  RunView& view = slot.view;
  KvEntryMeta* metas = Scratch(tls.metas, seq.num_ctx);
  int32_t* keys = Scratch(tls.keys, seq.num_ctx);
  int32_t* ents = Scratch(slot.entries, run.count * seq.num_ctx);
  // The entries token t sees, in context order, into list (metas too);
  // returns their count. *windowed counts the entries it would see but
  // for the sliding window.
  int64_t cut = 0;
  auto gather = [&](int64_t t, int32_t* list, int64_t* windowed) {
    int64_t n = 0;
    for (int64_t j = 0; j < seq.num_ctx; ++j) {
      const int64_t e = entries.Slot(seq, j);
      const KvEntryMeta m = entries.Meta(e, j);
      if (!EntryVisible(seq, q_meta[t], m)) continue;
      if (OutsideWindow(q_meta[t], m, shape.window)) {
        ++*windowed;
        continue;
      }
      metas[n] = m;
      list[n++] = static_cast<int32_t>(e);
    }
    return n;
  };
  // The run's last token's entries serve every token that sees exactly a
  // prefix of them; others go alone. A token of the last token's stream
  // at y <= its y sees a subset of them: entry m iff key(m) <= its y, with
  // key = y for the stream's own entries and y + 1 for others' (it sees
  // those strictly below). When keys never decrease along the list (one
  // causal stream; branches), every such subset is a prefix.
  const int64_t last = run.first + run.count - 1;
  view.n_last = gather(last, ents, &cut);
  const int64_t n_last = view.n_last;
  const KvEntryMeta ql = q_meta[last];
  bool monotone = true;
  for (int64_t j = 0; j < n_last; ++j) {
    keys[j] = metas[j].stream == ql.stream ? metas[j].y : metas[j].y + 1;
    monotone = monotone && (j == 0 || keys[j] >= keys[j - 1]);
  }
  // (Under a sliding window an earlier token also sees some of the
  // entries the window took from the last token's: it goes alone then.)
  auto sees_prefix = [&](int64_t t, int64_t* nt) {
    const KvEntryMeta qt = q_meta[t];
    if (qt.stream != ql.stream || qt.y > ql.y) return false;
    if (cut > 0 && qt.y != ql.y) return false;
    if (monotone) {
      *nt = std::upper_bound(keys, keys + n_last, qt.y) - keys;
      return true;
    }
    *nt = 0;
    while (*nt < n_last && keys[*nt] <= qt.y) ++*nt;
    for (int64_t j = *nt; j < n_last; ++j) {
      if (keys[j] <= qt.y) return false;
    }
    return true;
  };
  view.num_prefix = view.num_alone = 0;
  int64_t at = n_last;
  for (int64_t t = run.first; t < last; ++t) {
    int64_t nt = 0;
    if (sees_prefix(t, &nt)) {
      view.prefix_t[view.num_prefix] = t;
      view.prefix_n[view.num_prefix++] = nt;
    } else {
      const int i = view.num_alone++;
      view.alone_t[i] = t;
      view.alone_at[i] = at;
      int64_t unused = 0;
      view.alone_n[i] = gather(t, ents + at, &unused);
      at += view.alone_n[i];
    }
  }
}

// The run's view for this thread: built at its first task of the run in
// the call, or with a view_pass at its first task of the run in the pass
// (kept for the later layers). The kernels fetch the rows ahead as they
// go (ScoresT). docs/perf-log/code-notes.md has what each choice measured.
const ViewSlot& RunViewFor(const AttentionShape& shape, const PagedKvLayer& kv,
                           const PagedEntries& entries,
                           const PagedAttentionSeq& seq,
                           const KvEntryMeta* q_meta, const TokenRun& run,
                           int64_t run_index, bool first) {
  ViewSlot* slot = &tls.view;
  const bool kept =
      kv.view_pass != 0 &&
      run_index < static_cast<int64_t>(tls.passes.size()) &&
      run.count * seq.num_ctx <=
          static_cast<int64_t>(tls.passes[run_index].entries.size());
  if (kept) {
    slot = &tls.passes[run_index];
    if (slot->pass != kv.view_pass || slot->first != run.first ||
        slot->count != run.count) {
      BuildRunView(shape, entries, seq, q_meta, run, *slot);
      slot->pass = kv.view_pass;
      slot->first = run.first;
      slot->count = run.count;
    }
  } else if (first) {
    BuildRunView(shape, entries, seq, q_meta, run, *slot);
  }
  return *slot;
}

// KV head kvh's query heads [h0, h0 + g) of the run's tokens over what its
// view says they see: the last token's entries (shared by the tokens that
// see a prefix of them), then each token that sees a list of its own.
void AttendRun(const AttentionShape& shape, const PagedEntries& entries,
               const float* q, float* out, const PagedAttentionSeq& seq,
               const TokenRun& run, const ViewSlot& slot, int64_t kvh,
               int64_t h0, int g, float scale) {
  const RunView& view = slot.view;
  const int32_t* ents = slot.entries.data();
  const uint16_t** k_rows = Scratch(tls.k_rows, seq.num_ctx);
  const uint16_t** v_rows = Scratch(tls.v_rows, seq.num_ctx);
  const KernelChoice kernels =
      ChooseKernels(seq.kernel_tokens > 0 ? seq.kernel_tokens : seq.num_tokens,
                    shape.head_dim);
  // This KV head's rows of n listed entries.
  auto rows_of = [&](const int32_t* list, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      k_rows[j] = entries.K(list[j], kvh);
      v_rows[j] = entries.V(list[j], kvh);
    }
  };
  QueryRows rows;
  for (int i = 0; i < view.num_prefix; ++i) {
    AddRows(shape, q, out, view.prefix_t[i], h0, g, view.prefix_n[i], &rows);
  }
  AddRows(shape, q, out, run.first + run.count - 1, h0, g, view.n_last, &rows);
  rows_of(ents, view.n_last);
  AttendRows(rows, k_rows, v_rows, shape.head_dim, scale, shape.softcap,
             kernels);
  for (int i = 0; i < view.num_alone; ++i) {
    QueryRows one;
    AddRows(shape, q, out, view.alone_t[i], h0, g, view.alone_n[i], &one);
    rows_of(ents + view.alone_at[i], view.alone_n[i]);
    AttendRows(one, k_rows, v_rows, shape.head_dim, scale, shape.softcap,
               kernels);
  }
}

}  // namespace

namespace internal {

float ScoreScale(const AttentionShape& shape) {
  return shape.scale > 0 ? shape.scale
                         : 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
}

void SoftmaxRow(float* row, int64_t n, int64_t ld, float scale) {
  if (UseAvx512()) return SoftmaxRowAvx512(row, n, ld, scale);
  const int64_t n_pad = (n + kLanes - 1) / kLanes * kLanes;
  float max = -INFINITY;
  if (UseAvx2()) {
    max = ScaleMaxAvx2(row, n, scale);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      row[j] *= scale;
      max = std::max(max, row[j]);
    }
  }
  std::fill(row + n, row + n_pad, -INFINITY);
  const double sum = ExpShiftedSum(row, max, row, n_pad);
  const float inv_sum = static_cast<float>(1.0 / sum);
  if (UseAvx2()) {
    ScaleAvx2(row, n, inv_sum);
  } else {
    for (int64_t j = 0; j < n; ++j) row[j] *= inv_sum;
  }
  RoundToFp16Row(row, row, n);
  std::fill(row + n, row + ld, 0.0f);
}

}  // namespace internal

void ReserveAttentionScratch(int64_t max_ctx) {
  Scratch(tls.k_rows, max_ctx);
  Scratch(tls.v_rows, max_ctx);
  Scratch(tls.metas, max_ctx);
  Scratch(tls.keys, max_ctx);
  Scratch(tls.view.entries, kMaxRows * max_ctx);
  tls.passes.resize(kViewSlots);
  for (ViewSlot& slot : tls.passes) Scratch(slot.entries, max_ctx);
  Scratch(tls.scores, kMaxRows * ((max_ctx + kLanes - 1) / kLanes * kLanes));
  Scratch(tls.acc, 4 * kLanes * kMaxHeadDim);
  if (UseAvx512()) internal::ReserveResidueWeights(max_ctx);
}

void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool) {
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  const float scale = internal::ScoreScale(shape);
  const KernelChoice kernels = ChooseKernels(n_tok, shape.head_dim);
  const TaskSplit split(
      shape, n_tok, pool, [](int64_t) { return true; },
      [&](int64_t t) { return int64_t{q_positions[t]} + 1; },
      [](int64_t) { return false; });
  split.Run(pool, [&](const TokenRun& run, int64_t, int64_t kvh, int64_t h0,
                      int g, bool) {
    QueryRows rows;
    int64_t n = 0;
    for (int64_t t = run.first; t < run.first + run.count; ++t) {
      const int64_t nt = static_cast<int64_t>(q_positions[t]) + 1;
      AddRows(shape, q, out, t, h0, g, nt, &rows);
      n = std::max(n, nt);
    }
    const uint16_t** k_rows = Scratch(tls.k_rows, n);
    const uint16_t** v_rows = Scratch(tls.v_rows, n);
    const int64_t kv_off = kvh * shape.head_dim;
    for (int64_t j = 0; j < n; ++j) {
      k_rows[j] = k + j * kv_stride + kv_off;
      v_rows[j] = v + j * kv_stride + kv_off;
    }
    AttendRows(rows, k_rows, v_rows, shape.head_dim, scale, shape.softcap,
               kernels);
  });
}

void PagedAttention(
    const AttentionShape& shape, const PagedKvLayer& kv, const float* q,
    const KvEntryMeta* q_meta, const PagedAttentionSeq* seqs,
    const int32_t* token_seq, int64_t n_tok, float* out, ThreadPool* pool,
    absl::FunctionRef<void(int64_t, int64_t, int64_t, int64_t)> done) {
  const PagedEntries entries(shape, kv);
  const float scale = internal::ScoreScale(shape);
  // One-token sequences over long contexts take the long-context phases
  // (attention_long.cc) when the call splits them (UseLongSplit), the rest
  // one task per query-row group.
  const bool use_split = UseLongSplit(shape, seqs, token_seq, n_tok, pool);
  auto long_single = [&](int64_t t) {
    return use_split && LongOne(seqs[token_seq[t]]);
  };
  const TaskSplit split(
      shape, n_tok, pool,
      [&](int64_t t) { return token_seq[t] == token_seq[t - 1]; },
      [&](int64_t t) { return seqs[token_seq[t]].num_ctx; }, long_single);
  auto attend = [&](const TokenRun& run, int64_t run_index, int64_t kvh,
                    int64_t h0, int g, bool first) {
    const PagedAttentionSeq& seq = seqs[token_seq[run.first]];
    const ViewSlot& slot =
        RunViewFor(shape, kv, entries, seq, q_meta, run, run_index, first);
    AttendRun(shape, entries, q, out, seq, run, slot, kvh, h0, g, scale);
    done(run.first, run.first + run.count, h0 * shape.head_dim,
         (h0 + g) * shape.head_dim);
  };
  split.Run(pool, attend);
  internal::LongContextAttention(shape, entries, q, q_meta, seqs, token_seq,
                                 n_tok, long_single, scale, out, pool);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (long_single(t)) done(t, t + 1, 0, shape.n_head * shape.head_dim);
  }
}

}  // namespace braid::kernels::cpu
