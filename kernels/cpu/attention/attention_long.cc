// The long-context phases of PagedAttention (attention_paged.h).
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention/attention_kernels.h"
#include "kernels/cpu/attention/attention_paged.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/ops.h"

namespace braid::kernels::cpu::internal {
namespace {

// Keys per score task.
constexpr int64_t kSplitKeys = 512;
std::atomic<int64_t> g_long_split_calls{0};

}  // namespace

int64_t LongSplitCallsForTesting() { return g_long_split_calls.load(); }

void LongContextAttention(const AttentionShape& shape,
                          const PagedEntries& entries, const float* q,
                          const KvEntryMeta* q_meta,
                          const PagedAttentionSeq* seqs,
                          const int32_t* token_seq, int64_t n_tok,
                          absl::FunctionRef<bool(int64_t)> is_long, float scale,
                          float* out, ThreadPool* pool) {
  // The caller's buffers (grow-only), named by reference so the pool's
  // workers use these, not their own thread_local copies.
  struct LongScratch {
    std::vector<int64_t> longs, ent_off, score_off, counts;
    std::vector<const uint16_t*> kp, vp;
    std::vector<float> q16, scores, res;
    std::vector<std::array<int64_t, 3>> score_tasks;
  };
  thread_local LongScratch scratch;
  std::vector<int64_t>& longs = scratch.longs;
  std::vector<int64_t>& ent_off = scratch.ent_off;
  std::vector<int64_t>& score_off = scratch.score_off;
  std::vector<int64_t>& counts = scratch.counts;
  std::vector<const uint16_t*>& kp = scratch.kp;
  std::vector<const uint16_t*>& vp = scratch.vp;
  std::vector<float>& q16 = scratch.q16;
  std::vector<float>& scores = scratch.scores;
  std::vector<float>& res = scratch.res;
  std::vector<std::array<int64_t, 3>>& score_tasks = scratch.score_tasks;
  longs.clear();
  for (int64_t t = 0; t < n_tok; ++t) {
    if (is_long(t)) longs.push_back(t);
  }
  if (longs.empty()) return;
  g_long_split_calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t n_long = static_cast<int64_t>(longs.size());
  const int64_t n_kv = shape.n_kv_head, n_head = shape.n_head;
  const int64_t hd = shape.head_dim, group = n_head / n_kv;
  // Visible entries of each long token, as K and V row pointers per KV head
  // (kp[ent_off[i] * n_kv + kvh * n_i + j]).
  ent_off.assign(1, 0);
  score_off.assign(1, 0);
  for (int64_t i = 0; i < n_long; ++i) {
    const PagedAttentionSeq& seq = seqs[token_seq[longs[i]]];
    ent_off.push_back(ent_off.back() + seq.num_ctx);
    score_off.push_back(score_off.back() +
                        n_head *
                            ((seq.num_ctx + kLanes - 1) / kLanes * kLanes));
  }
  kp.resize(ent_off.back() * n_kv);
  vp.resize(kp.size());
  counts.assign(n_long, 0);
  for (int64_t i = 0; i < n_long; ++i) {
    const int64_t t = longs[i];
    const PagedAttentionSeq& seq = seqs[token_seq[t]];
    const uint16_t** k_i = kp.data() + ent_off[i] * n_kv;
    const uint16_t** v_i = vp.data() + ent_off[i] * n_kv;
    int64_t n = 0;
    for (int64_t j = 0; j < seq.num_ctx; ++j) {
      const int64_t e = entries.Slot(seq, j);
      const KvEntryMeta m = entries.Meta(e, j);
      if (!EntryVisible(seq, q_meta[t], m, shape.window)) continue;
      for (int64_t g = 0; g < n_kv; ++g) {
        k_i[g * seq.num_ctx + n] = entries.K(e, g);
        v_i[g * seq.num_ctx + n] = entries.V(e, g);
      }
      ++n;
    }
    counts[i] = n;
  }
  q16.resize(n_long * n_head * hd);
  for (int64_t i = 0; i < n_long; ++i) {
    RoundToFp16Row(q + longs[i] * n_head * hd, q16.data() + i * n_head * hd,
                   n_head * hd);
  }
  scores.resize(score_off.back());
  res.resize(n_long * n_head * 8 * hd);
  auto kernels_of = [&](int64_t i) {
    const PagedAttentionSeq& seq = seqs[token_seq[longs[i]]];
    return ChooseKernels(seq.kernel_tokens > 0 ? seq.kernel_tokens : 1, hd);
  };
  auto ld_of = [&](int64_t i) {
    return (score_off[i + 1] - score_off[i]) / n_head;
  };
  auto k_rows_of = [&](int64_t i, int64_t g) {
    const int64_t num_ctx = seqs[token_seq[longs[i]]].num_ctx;
    return kp.data() + ent_off[i] * n_kv + g * num_ctx;
  };
  auto v_rows_of = [&](int64_t i, int64_t g) {
    const int64_t num_ctx = seqs[token_seq[longs[i]]].num_ctx;
    return vp.data() + ent_off[i] * n_kv + g * num_ctx;
  };
  // Phase 1: scores, (token, KV head, range of kSplitKeys keys) per task.
  score_tasks.clear();
  for (int64_t i = 0; i < n_long; ++i) {
    for (int64_t g = 0; g < n_kv; ++g) {
      for (int64_t j0 = 0; j0 < counts[i]; j0 += kSplitKeys) {
        score_tasks.push_back({i, g, j0});
      }
    }
  }
  pool->ParallelFor(static_cast<int64_t>(score_tasks.size()), [&](int64_t x) {
    const auto [i, g, j0] = score_tasks[x];
    const int64_t cnt = std::min(kSplitKeys, counts[i] - j0);
    const float* qp[kMaxRows];
    for (int64_t h = 0; h < group; ++h) {
      qp[h] = q16.data() + (i * n_head + g * group + h) * hd;
    }
    internal::ScoresF16Avx512(
        k_rows_of(i, g) + j0, v_rows_of(i, g) + j0, cnt, qp,
        static_cast<int>(group), hd, kernels_of(i).kq_gemm,
        scores.data() + score_off[i] + g * group * ld_of(i) + j0, ld_of(i));
  });
  // Phase 2: softmax per (token, head).
  pool->ParallelFor(n_long * n_head, [&](int64_t x) {
    const int64_t i = x / n_head, h = x % n_head;
    float* row = scores.data() + score_off[i] + h * ld_of(i);
    if (shape.softcap > 0) SoftcapInPlace(row, counts[i], shape.softcap);
    SoftmaxRow(row, counts[i], ld_of(i), scale);
  });
  // Phase 3: weighted V sums, (token, KV head, residue) per task.
  pool->ParallelFor(n_long * n_kv * 8, [&](int64_t x) {
    const int64_t i = x / (n_kv * 8), g = (x / 8) % n_kv;
    const int r = static_cast<int>(x % 8);
    const int64_t slots = kernels_of(i).kqv_gemm ? kLanes : 4 * kLanes;
    internal::ResidueSumsF16Avx512(
        v_rows_of(i, g), counts[i],
        scores.data() + score_off[i] + g * group * ld_of(i), ld_of(i),
        static_cast<int>(group), hd, slots, r, r + 1,
        res.data() + (i * n_head + g * group) * 8 * hd);
  });
  // Phase 4: the residues' tree per (token, head).
  pool->ParallelFor(n_long * n_head, [&](int64_t x) {
    const int64_t i = x / n_head, h = x % n_head;
    internal::CombineResidues(res.data() + (i * n_head + h) * 8 * hd, hd,
                              out + (longs[i] * n_head + h) * hd);
  });
}

}  // namespace braid::kernels::cpu::internal
