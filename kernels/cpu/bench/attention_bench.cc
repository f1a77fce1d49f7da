// Microbenchmark of PagedAttention for decode-sized calls: --seqs sequences,
// one query token each (or --tokens per sequence), over --ctx cached entries
// in 16-entry blocks scattered over a pool, SmolLM2-135M's shape (9 heads, 3
// KV heads, head size 64). Prints microseconds per call and nanoseconds per
// (query head, visible entry) pair, best of --reps runs of --calls calls
// (timing the calls only: with --evict_mb, each call's rows and code are
// first pushed out of the caches, as the model's weights push them out
// between one layer's attention and the next; --evict_mb=8 gives the
// model's per-call time at 8 sequences). With --branches=K, one session's
// context instead (MULTISTREAM.md's branches): --ctx prefix entries, then K
// branch streams of --branch_len entries each, written in lockstep, and one
// query token a branch, each seeing the prefix and its own branch.
//   bazel run //kernels/cpu/bench:attention_bench -- --ctx=1500 --threads=2
//   bazel run //kernels/cpu/bench:attention_bench -- --ctx=32 --branches=4
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/thread_pool.h"

ABSL_FLAG(bool, view_pass, true,
          "the calls of a repetition share a k::PagedKvLayer::view_pass, as "
          "the layers of a forward pass do (each run's entries found once)");
ABSL_FLAG(int, ctx, 1500, "cached entries per sequence");
ABSL_FLAG(int, seqs, 1, "sequences");
ABSL_FLAG(int, tokens, 1, "query tokens per sequence");
ABSL_FLAG(int, threads, 2, "threads");
ABSL_FLAG(int, calls, 30, "calls per run (one per layer)");
ABSL_FLAG(int, reps, 5, "runs (best is reported)");
ABSL_FLAG(int, branches, 0,
          "instead of --seqs: one session context of --ctx prefix entries "
          "and this many branch streams (each seeing the prefix and itself) "
          "of --branch_len entries each, written in lockstep; one query "
          "token a branch");
ABSL_FLAG(int, branch_len, 64, "entries of each branch before the step");
ABSL_FLAG(int, evict_mb, 0,
          "MiB read between calls (untimed), as the model's weights pass "
          "through the caches between one layer's attention and the next");

ABSL_FLAG(bool, avx2, false,
          "the AVX2 kernels on an AVX-512 CPU (as a CPU without AVX-512 runs)");

namespace k = braid::kernels::cpu;

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_avx2)) k::SetDisableAvx512ForTesting(true);
  const int n_branches = absl::GetFlag(FLAGS_branches);
  const int branch_len = absl::GetFlag(FLAGS_branch_len);
  const int prefix = absl::GetFlag(FLAGS_ctx);
  // A session: one context, prefix then the branches' entries in lockstep
  // (n_q = its query tokens, one a branch, written last).
  const int ctx = n_branches > 0 ? prefix + n_branches * branch_len : prefix;
  const int n_seqs = n_branches > 0 ? 1 : absl::GetFlag(FLAGS_seqs);
  const int n_q = n_branches > 0 ? n_branches : absl::GetFlag(FLAGS_tokens);
  const k::AttentionShape shape{9, 3, 64};
  const int64_t kv_stride = shape.n_kv_head * shape.head_dim;
  constexpr int kBs = 16;
  const int per_seq = (ctx + n_q + kBs - 1) / kBs;
  const int n_blocks = per_seq * n_seqs;
  // Each layer has its own pool (as the model's), blocks shuffled.
  const int calls = absl::GetFlag(FLAGS_calls);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Cache-line aligned like model::PagedKvPool's storage (a std::vector's
  // large allocation starts 16 bytes into a page: rows straddle lines).
  struct Free {
    void operator()(uint16_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint16_t, Free>> k(calls), v(calls);
  const size_t elems = static_cast<size_t>(n_blocks) * kBs * kv_stride;
  const size_t bytes = (elems * sizeof(uint16_t) + 63) / 64 * 64;
  for (int l = 0; l < calls; ++l) {
    k[l].reset(static_cast<uint16_t*>(std::aligned_alloc(64, bytes)));
    v[l].reset(static_cast<uint16_t*>(std::aligned_alloc(64, bytes)));
    for (size_t i = 0; i < elems; ++i) k[l].get()[i] = k::Fp32ToFp16(dist(rng));
    for (size_t i = 0; i < elems; ++i) v[l].get()[i] = k::Fp32ToFp16(dist(rng));
  }
  std::vector<int32_t> blocks(n_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<k::PagedAttentionSeq> seqs(n_seqs);
  std::vector<k::KvEntryMeta> q_meta;
  std::vector<int32_t> token_seq;
  // Entry metadata (branches only): stream 0 the prefix, stream b + 1
  // branch b, in context order; pool slot of entry i via the block table.
  std::vector<k::KvEntryMeta> meta;
  const int32_t prefix_stream = 0;
  if (n_branches > 0) {
    meta.resize(static_cast<size_t>(n_blocks) * kBs);
    auto put = [&](int i, k::KvEntryMeta m) {
      meta[static_cast<size_t>(blocks[i / kBs]) * kBs + i % kBs] = m;
    };
    for (int i = 0; i < prefix; ++i) put(i, {0, i});
    for (int j = 0; j <= branch_len; ++j) {
      for (int b = 0; b < n_branches; ++b) {
        put(prefix + j * n_branches + b, {b + 1, prefix + j});
      }
    }
    seqs[0] = {0, n_q, ctx + n_q, blocks.data(), &prefix_stream, 1};
    for (int b = 0; b < n_branches; ++b) {
      q_meta.push_back({b + 1, prefix + branch_len});
      token_seq.push_back(0);
    }
  }
  for (int s = 0; s < n_seqs && n_branches == 0; ++s) {
    seqs[s] = {s * n_q, n_q, ctx + n_q, blocks.data() + s * per_seq,
               nullptr, 0};
    for (int t = 0; t < n_q; ++t) {
      q_meta.push_back({0, ctx + t});
      token_seq.push_back(s);
    }
  }
  const int64_t n_tok = int64_t{n_seqs} * n_q;
  std::vector<float> q(n_tok * shape.n_head * shape.head_dim), out(q.size());
  for (float& e : q) e = dist(rng);
  k::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  std::vector<uint8_t> evict(
      static_cast<size_t>(absl::GetFlag(FLAGS_evict_mb)) << 20, 1);
  uint64_t sink = 0;
  double best = 1e9;
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    double total = 0;
    for (int l = 0; l < calls; ++l) {
      if (!evict.empty()) {  // One line in 64 bytes, split over the pool.
        pool.ParallelFor(pool.num_threads(), [&](int64_t c) {
          const size_t part = evict.size() / pool.num_threads();
          uint64_t acc = 0;
          for (size_t i = c * part; i < (c + 1) * part; i += 64) {
            acc += evict[i];
          }
          if (acc == 42) sink += acc;  // (never: keeps the reads)
        });
      }
      const auto t0 = std::chrono::steady_clock::now();
      const k::PagedKvLayer layer{
          k[l].get(), v[l].get(), meta.empty() ? nullptr : meta.data(), kBs,
          absl::GetFlag(FLAGS_view_pass) ? static_cast<uint64_t>(rep) + 1 : 0};
      k::PagedAttention(shape, layer, q.data(), q_meta.data(), seqs.data(),
                        token_seq.data(), n_tok, out.data(), &pool);
      total +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
    }
    best = std::min(best, total);
  }
  if (sink == 1) std::printf("!");
  // Entries a query sees: a branch's query the prefix and its own.
  const double seen =
      n_branches > 0 ? prefix + branch_len + 1 : ctx + (n_q + 1) / 2.0;
  const double pairs = static_cast<double>(n_tok) * shape.n_head * seen * calls;
  std::printf(
      "ctx %d seqs %d tokens %d branches %d threads %d: %.1f us per call, "
      "%.2f ns per (head, entry)\n",
      ctx, n_seqs, n_q, n_branches, pool.num_threads(), best / calls * 1e6,
      best / pairs * 1e9);
  return 0;
}
