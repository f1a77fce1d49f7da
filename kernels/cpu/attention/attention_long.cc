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

// One call's long tokens and their buffers (grow-only, thread_local in
// LongContextAttention: the pool's workers use the caller's through the
// reference, not their own copies).
struct LongScratch {
  std::vector<int64_t> longs, ent_off, score_off, counts;
  std::vector<const uint16_t*> kp, vp;
  std::vector<float> q16, scores, res;
  std::vector<std::array<int64_t, 3>> score_tasks;
};

// The phases of LongContextAttention over the long tokens i < n_long
// (longs[i] is the token's index in the call).
class LongSplit {
 public:
  LongSplit(const AttentionShape& shape, const PagedAttentionSeq* seqs,
            const int32_t* token_seq, LongScratch& s)
      : shape_(shape),
        seqs_(seqs),
        token_seq_(token_seq),
        s_(s),
        n_kv_(shape.n_kv_head),
        n_head_(shape.n_head),
        hd_(shape.head_dim),
        group_(shape.n_head / shape.n_kv_head) {}

  // The long tokens of [0, n_tok); false when there are none.
  bool FindLongs(int64_t n_tok, absl::FunctionRef<bool(int64_t)> is_long) {
    s_.longs.clear();
    for (int64_t t = 0; t < n_tok; ++t) {
      if (is_long(t)) s_.longs.push_back(t);
    }
    n_long_ = static_cast<int64_t>(s_.longs.size());
    return n_long_ > 0;
  }

  // Visible entries of each long token, as K and V row pointers per KV head
  // (kp[ent_off[i] * n_kv + kvh * num_ctx + j]), and its query in f16
  // precision.
  void Gather(const PagedEntries& entries, const float* q,
              const KvEntryMeta* q_meta) {
    s_.ent_off.assign(1, 0);
    s_.score_off.assign(1, 0);
    for (int64_t i = 0; i < n_long_; ++i) {
      const int64_t num_ctx = seq(i).num_ctx;
      s_.ent_off.push_back(s_.ent_off.back() + num_ctx);
      s_.score_off.push_back(s_.score_off.back() +
                             n_head_ *
                                 ((num_ctx + kLanes - 1) / kLanes * kLanes));
    }
    s_.kp.resize(s_.ent_off.back() * n_kv_);
    s_.vp.resize(s_.kp.size());
    s_.counts.assign(n_long_, 0);
    for (int64_t i = 0; i < n_long_; ++i) {
      const PagedAttentionSeq& sq = seq(i);
      int64_t n = 0;
      for (int64_t j = 0; j < sq.num_ctx; ++j) {
        const int64_t e = entries.Slot(sq, j);
        const KvEntryMeta m = entries.Meta(e, j);
        if (!EntryVisible(sq, q_meta[s_.longs[i]], m, shape_.window)) continue;
        for (int64_t g = 0; g < n_kv_; ++g) {
          k_rows(i, g)[n] = entries.K(e, g);
          v_rows(i, g)[n] = entries.V(e, g);
        }
        ++n;
      }
      s_.counts[i] = n;
    }
    s_.q16.resize(n_long_ * n_head_ * hd_);
    for (int64_t i = 0; i < n_long_; ++i) {
      RoundToFp16Row(q + s_.longs[i] * n_head_ * hd_,
                     s_.q16.data() + i * n_head_ * hd_, n_head_ * hd_);
    }
    s_.scores.resize(s_.score_off.back());
    s_.res.resize(n_long_ * n_head_ * 8 * hd_);
  }

  // Phase 1: scores, (token, KV head, range of kSplitKeys keys) per task.
  void Scores(ThreadPool* pool) {
    s_.score_tasks.clear();
    for (int64_t i = 0; i < n_long_; ++i) {
      for (int64_t g = 0; g < n_kv_; ++g) {
        for (int64_t j0 = 0; j0 < s_.counts[i]; j0 += kSplitKeys) {
          s_.score_tasks.push_back({i, g, j0});
        }
      }
    }
    pool->ParallelFor(static_cast<int64_t>(s_.score_tasks.size()),
                      [&](int64_t x) {
                        const auto [i, g, j0] = s_.score_tasks[x];
                        ScoreTask(i, g, j0);
                      });
  }

  // Phase 2: softmax per (token, head).
  void Softmax(float scale, ThreadPool* pool) {
    pool->ParallelFor(n_long_ * n_head_, [&](int64_t x) {
      const int64_t i = x / n_head_, h = x % n_head_;
      float* row = s_.scores.data() + s_.score_off[i] + h * ld(i);
      if (shape_.softcap > 0) SoftcapInPlace(row, s_.counts[i], shape_.softcap);
      SoftmaxRow(row, s_.counts[i], ld(i), scale);
    });
  }

  // Phase 3: weighted V sums, (token, KV head, residue) per task.
  void Residues(ThreadPool* pool) {
    pool->ParallelFor(n_long_ * n_kv_ * 8, [&](int64_t x) {
      const int64_t i = x / (n_kv_ * 8), g = (x / 8) % n_kv_;
      const int r = static_cast<int>(x % 8);
      const int64_t slots = kernels(i).kqv_gemm ? kLanes : 4 * kLanes;
      internal::ResidueSumsF16Avx512(
          v_rows(i, g), s_.counts[i],
          s_.scores.data() + s_.score_off[i] + g * group_ * ld(i), ld(i),
          static_cast<int>(group_), hd_, slots, r, r + 1,
          s_.res.data() + (i * n_head_ + g * group_) * 8 * hd_);
    });
  }

  // Phase 4: the residues' tree per (token, head), into `out`.
  void Combine(float* out, ThreadPool* pool) {
    pool->ParallelFor(n_long_ * n_head_, [&](int64_t x) {
      const int64_t i = x / n_head_, h = x % n_head_;
      internal::CombineResidues(s_.res.data() + (i * n_head_ + h) * 8 * hd_,
                                hd_, out + (s_.longs[i] * n_head_ + h) * hd_);
    });
  }

 private:
  const PagedAttentionSeq& seq(int64_t i) const {
    return seqs_[token_seq_[s_.longs[i]]];
  }
  KernelChoice kernels(int64_t i) const {
    const PagedAttentionSeq& sq = seq(i);
    return ChooseKernels(sq.kernel_tokens > 0 ? sq.kernel_tokens : 1, hd_);
  }
  // The scores' row stride of token i.
  int64_t ld(int64_t i) const {
    return (s_.score_off[i + 1] - s_.score_off[i]) / n_head_;
  }
  const uint16_t** k_rows(int64_t i, int64_t g) {
    return s_.kp.data() + s_.ent_off[i] * n_kv_ + g * seq(i).num_ctx;
  }
  const uint16_t** v_rows(int64_t i, int64_t g) {
    return s_.vp.data() + s_.ent_off[i] * n_kv_ + g * seq(i).num_ctx;
  }

  void ScoreTask(int64_t i, int64_t g, int64_t j0) {
    const int64_t cnt = std::min(kSplitKeys, s_.counts[i] - j0);
    const float* qp[kMaxRows];
    for (int64_t h = 0; h < group_; ++h) {
      qp[h] = s_.q16.data() + (i * n_head_ + g * group_ + h) * hd_;
    }
    internal::ScoresF16Avx512(
        k_rows(i, g) + j0, v_rows(i, g) + j0, cnt, qp, static_cast<int>(group_),
        hd_, kernels(i).kq_gemm,
        s_.scores.data() + s_.score_off[i] + g * group_ * ld(i) + j0, ld(i));
  }

  const AttentionShape& shape_;
  const PagedAttentionSeq* const seqs_;
  const int32_t* const token_seq_;
  LongScratch& s_;
  const int64_t n_kv_, n_head_, hd_, group_;
  int64_t n_long_ = 0;
};

}  // namespace

int64_t LongSplitCallsForTesting() { return g_long_split_calls.load(); }

void LongContextAttention(const AttentionShape& shape,
                          const PagedEntries& entries, const float* q,
                          const KvEntryMeta* q_meta,
                          const PagedAttentionSeq* seqs,
                          const int32_t* token_seq, int64_t n_tok,
                          absl::FunctionRef<bool(int64_t)> is_long, float scale,
                          float* out, ThreadPool* pool) {
  thread_local LongScratch scratch;
  LongSplit split(shape, seqs, token_seq, scratch);
  if (!split.FindLongs(n_tok, is_long)) return;
  g_long_split_calls.fetch_add(1, std::memory_order_relaxed);
  split.Gather(entries, q, q_meta);
  split.Scores(pool);
  split.Softmax(scale, pool);
  split.Residues(pool);
  split.Combine(out, pool);
}

}  // namespace braid::kernels::cpu::internal
