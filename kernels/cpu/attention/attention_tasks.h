// How one call of PagedAttention (attention.cc) is split into tasks for the
// thread pool. Internal to kernels/cpu.
#ifndef BRAID_KERNELS_CPU_ATTENTION_ATTENTION_TASKS_H_
#define BRAID_KERNELS_CPU_ATTENTION_ATTENTION_TASKS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/attention/attention_paged.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu::internal {

// A run of consecutive query tokens of one sequence.
struct TokenRun {
  int64_t first = 0;
  int64_t count = 0;
  int64_t cost = 0;  // count x the context of its last token
};

// How one call is split into tasks: (run of query tokens of one sequence, KV
// head, group of that KV head's query heads), each with at most kMaxRows
// query rows. Rows are grouped to share K/V rows, but no task takes more
// than about half a thread's share of the work (a long prompt chunk
// beside short decodes would leave the other threads idle), and the pool
// hands out the largest tasks first.
class TaskSplit {
 public:
  // same_seq(t) says whether token t belongs with token t - 1; ctx(t) is the
  // number of context entries token t's sequence holds; tokens with skip(t)
  // (one-token sequences computed elsewhere) get no task.
  template <typename SameSeq, typename Ctx, typename Skip>
  TaskSplit(const AttentionShape& shape, int64_t n_tok, ThreadPool* pool,
            SameSeq same_seq, Ctx ctx, Skip skip)
      : shape_(shape) {
    thread_local std::vector<TokenRun> seq_runs;
    seq_runs.clear();
    int64_t total = 0;
    for (int64_t t = 0; t < n_tok; ++t) {
      if (skip(t)) continue;
      if (!seq_runs.empty() && same_seq(t) &&
          seq_runs.back().first + seq_runs.back().count == t) {
        ++seq_runs.back().count;
      } else {
        seq_runs.push_back({t, 1, 0});
      }
      total += ctx(t);
    }
    group_ = shape.n_head / shape.n_kv_head;
    heads_ = std::min<int64_t>(group_, kMaxRows);
    const int64_t max_tokens = std::max<int64_t>(1, kMaxRows / heads_);
    const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
    // A task's tokens x context at most: its query rows (tokens x heads_)
    // x context then stay within half a thread's share of the call's.
    const int64_t target =
        std::max<int64_t>(1, total * shape.n_head / (2 * threads * heads_));
    thread_local std::vector<TokenRun> runs;
    runs.clear();
    for (const TokenRun& r : seq_runs) {
      const int64_t c = std::max<int64_t>(1, ctx(r.first + r.count - 1));
      const int64_t tokens = std::clamp<int64_t>(target / c, 1, max_tokens);
      for (int64_t t = 0; t < r.count; t += tokens) {
        const int64_t n = std::min(tokens, r.count - t);
        runs.push_back({r.first + t, n, n * c});
      }
    }
    // Too few whole tasks to balance the threads: tasks of one query head
    // (each reads its KV head's rows again). Runs of one token (decode)
    // gain the most from sharing the rows, so they split only when every
    // one-head task still has a thread of its own. One sequence decoding,
    // 2 threads (attention_bench --seqs=1 --evict_mb=8): ctx 30 3.2 -> 2.1
    // us a call, 91 6.7 -> 5.2, 300 13.5 -> 10.7, 1000 56.8 -> 44.7; a
    // session's 4 branches (one run of 4 tokens, --ctx=32 --branches=4
    // --branch_len=32) stay split: 9.8-10.3 us against 10.7-11.0 whole.
    bool one_token = true;
    for (const TokenRun& r : runs) one_token = one_token && r.count == 1;
    const int64_t whole = static_cast<int64_t>(runs.size()) * shape.n_kv_head *
                          ((group_ + heads_ - 1) / heads_);
    if (one_token ? whole * group_ <= threads : whole < 2 * threads) {
      heads_ = 1;
    }
    // (std::sort: stable_sort may allocate.)
    std::sort(runs.begin(), runs.end(),
              [](const TokenRun& a, const TokenRun& b) {
                return a.cost != b.cost ? a.cost > b.cost : a.first < b.first;
              });
    runs_ = &runs;
    per_kv_ = (group_ + heads_ - 1) / heads_;
  }

  // Runs task(run, run_index, kv_head, first_head, num_heads, first) for
  // every task (run_index: the run's place in the call's order, the same
  // in every call with the same tokens and contexts):
  // the tasks in order of size, largest first, each thread taking them from
  // the front of its share, then from the back of the others'
  // (ThreadPool::ParallelRanges, one task a run); `first` says whether the
  // task is the first of its run on this thread in this call (a run's
  // tasks, its KV heads, are adjacent, so a share mostly holds whole runs).
  template <typename Task>
  void Run(ThreadPool* pool, Task task) const {
    const int64_t n_kv = shape_.n_kv_head;
    auto kv_head = [&](int64_t i) { return (i / per_kv_) % n_kv; };
    auto run_of = [&](int64_t i) -> const TokenRun& {
      return (*runs_)[i / (per_kv_ * n_kv)];
    };
    auto run = [&](int64_t i) {
      const int64_t sub = i % per_kv_;
      const int64_t kvh = kv_head(i);
      const int64_t h0 = kvh * group_ + sub * heads_;
      const int g = static_cast<int>(std::min(heads_, (kvh + 1) * group_ - h0));
      // This thread's last task's run, in this call.
      thread_local std::pair<uint64_t, const TokenRun*> last{0, nullptr};
      const TokenRun* r = &run_of(i);
      const bool first = last != std::pair{call_, r};
      last = {call_, r};
      task(*r, i / (per_kv_ * n_kv), kvh, h0, g, first);
    };
    const int64_t tasks = static_cast<int64_t>(runs_->size()) * n_kv * per_kv_;
    if (pool == nullptr) {
      for (int64_t i = 0; i < tasks; ++i) run(i);
      return;
    }
    pool->ParallelRanges(tasks, 1, [&](int64_t u0, int64_t u1, int64_t) {
      for (int64_t i = u0; i < u1; ++i) run(i);
    });
  }

 private:
  const AttentionShape& shape_;
  int64_t group_ = 0;  // query heads per KV head
  int64_t heads_ = 0;  // heads per task
  int64_t per_kv_ = 0;
  const std::vector<TokenRun>* runs_ = nullptr;  // the caller's thread's
  // Numbers the calls (never 0), for Run's `first`.
  inline static std::atomic<uint64_t> calls_{0};
  const uint64_t call_ = ++calls_;
};

}  // namespace braid::kernels::cpu::internal

#endif  // BRAID_KERNELS_CPU_ATTENTION_ATTENTION_TASKS_H_
