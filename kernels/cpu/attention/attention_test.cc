#include "kernels/cpu/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention/attention_kernels.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {
namespace {

// Naive reference in double: full score row, softmax, weighted sum; K/V from
// fp16, the query and the softmax weights rounded to fp16 (as ggml does).
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
      for (double& e : p)
        e = Fp16ToFp32(Fp32ToFp16(static_cast<float>(e / sum)));
      for (int64_t i = 0; i < s.head_dim; ++i) {
        double acc = 0;
        for (int64_t j = 0; j <= pos[t]; ++j) {
          acc += p[j] * Fp16ToFp32(v[(j * s.n_kv_head + kvh) * s.head_dim + i]);
        }
        out[(t * s.n_head + h) * s.head_dim + i] = acc;
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

// A one-token call (llama.cpp's ggml_vec_dot_f16 order) and a batched call
// (tinyBLAS order) differ only in rounding; the AVX2 and scalar paths agree to
// the bit in both.
TEST(AttentionTest, SingleAndBatchedAgreeAndPathsAreBitIdentical) {
  const AttentionShape s{4, 2, 64};
  const int64_t n_ctx = 90;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(n_ctx * s.n_kv_head * s.head_dim), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng));
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  const int64_t row = s.n_head * s.head_dim;
  std::vector<float> q(3 * row);
  for (float& e : q) e = dist(rng);
  const int32_t pos[3] = {70, 88, 89};
  struct Outputs {
    std::vector<float> batched, single;
  };
  auto run = [&](bool scalar) {
    SetForceScalarForTesting(scalar);
    Outputs o{std::vector<float>(q.size()), std::vector<float>(q.size())};
    Attention(s, q.data(), pos, 3, k.data(), v.data(), o.batched.data(),
              nullptr);
    for (int t = 0; t < 3; ++t) {
      Attention(s, q.data() + t * row, pos + t, 1, k.data(), v.data(),
                o.single.data() + t * row, nullptr);
    }
    SetForceScalarForTesting(false);
    return o;
  };
  const Outputs fast = run(false), slow = run(true);
  EXPECT_EQ(fast.batched, slow.batched);
  EXPECT_EQ(fast.single, slow.single);
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_NEAR(fast.single[i], fast.batched[i], 1e-5) << i;
  }
}

// Two streams over a paged cache with a shared prefix: stream 0 holds y 0..5
// (prompt) and 6..13, stream 1 holds y 6..13, interleaved entry by entry in a
// scrambled block table. Each query is checked against a naive reference
// that applies the visibility rule as written in MULTISTREAM.md.
TEST(PagedAttentionTest, TwoStreamMaskMatchesNaiveReference) {
  const AttentionShape s{4, 2, 32};
  const int64_t kv_stride = s.n_kv_head * s.head_dim;
  const int64_t bs = 4, num_blocks = 12;
  std::vector<KvEntryMeta> ctx;  // Context entries in order.
  for (int y = 0; y < 6; ++y) ctx.push_back({0, y});
  for (int y = 6; y < 14; ++y) {
    ctx.push_back({0, y});
    ctx.push_back({1, y});
  }
  const int64_t n_ctx = static_cast<int64_t>(ctx.size());  // 22
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9};  // 6 x 4 >= 22
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(num_blocks * bs * kv_stride), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng));
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  std::vector<KvEntryMeta> meta(num_blocks * bs, KvEntryMeta{9, 999});
  for (int64_t j = 0; j < n_ctx; ++j) {
    meta[table[j / bs] * bs + j % bs] = ctx[j];
  }
  // Queries: the last 6 entries (both streams at y = 11, 12, 13), one
  // sequence seeing the other stream (multi-stream model), and the same
  // queries in a sequence that sees only its own stream (branches).
  const int64_t n_q = 6, first_q = n_ctx - n_q;
  std::vector<KvEntryMeta> q_meta(ctx.begin() + first_q, ctx.end());
  q_meta.insert(q_meta.end(), q_meta.begin(), q_meta.end());
  const int64_t row = s.n_head * s.head_dim;
  std::vector<float> q(2 * n_q * row);
  for (float& e : q) e = dist(rng);
  const int32_t other_streams[] = {0, 1};
  const PagedAttentionSeq seqs[2] = {
      {0, n_q, n_ctx, table.data(), other_streams, 2},
      {n_q, n_q, n_ctx, table.data(), nullptr, 0}};
  std::vector<int32_t> token_seq(2 * n_q, 0);
  for (int64_t t = n_q; t < 2 * n_q; ++t) token_seq[t] = 1;
  std::vector<float> out(q.size());
  ThreadPool pool(2);
  const PagedKvLayer layer{k.data(), v.data(), meta.data(), bs};
  PagedAttention(s, layer, q.data(), q_meta.data(), seqs, token_seq.data(),
                 2 * n_q, out.data(), &pool);

  for (int64_t t = 0; t < 2 * n_q; ++t) {
    const bool sees_other = t < n_q;
    const KvEntryMeta qm = q_meta[t];
    // Gather the visible entries into a contiguous cache for the reference.
    std::vector<uint16_t> kc, vc;
    int visible = 0;
    for (int64_t j = 0; j < n_ctx; ++j) {
      const KvEntryMeta m = ctx[j];
      const bool in_sees = m.stream == qm.stream || sees_other;
      if (!(in_sees && (m.y < qm.y || (m.stream == qm.stream && m.y <= qm.y))))
        continue;
      const int64_t slot = table[j / bs] * bs + j % bs;
      kc.insert(kc.end(), &k[slot * kv_stride], &k[(slot + 1) * kv_stride]);
      vc.insert(vc.end(), &v[slot * kv_stride], &v[(slot + 1) * kv_stride]);
      ++visible;
    }
    ASSERT_GT(visible, 0);
    const int32_t last = visible - 1;
    std::vector<float> ref(row);
    ReferenceAttention(s, q.data() + t * row, &last, 1, kc.data(), vc.data(),
                       ref.data());
    for (int64_t i = 0; i < row; ++i) {
      ASSERT_NEAR(out[t * row + i], ref[i], 1e-4) << "query " << t << " " << i;
    }
  }
  // The mask matters: a branch query and a multi-stream query differ.
  EXPECT_NE(std::vector<float>(out.begin(), out.begin() + row),
            std::vector<float>(out.begin() + n_q * row,
                               out.begin() + (n_q + 1) * row));
}

// With one stream and the context in order, the paged kernel is the contiguous
// kernel bit for bit, whatever the block table.
TEST(PagedAttentionTest, OneStreamEqualsContiguousBitForBit) {
  const AttentionShape s{6, 2, 64};
  const int64_t kv_stride = s.n_kv_head * s.head_dim;
  const int64_t bs = 16, n_ctx = 75;
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(n_ctx * kv_stride), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng));
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  const std::vector<int32_t> table = {3, 0, 4, 1, 2};
  std::vector<uint16_t> pk(5 * bs * kv_stride), pv(pk.size());
  std::vector<KvEntryMeta> meta(5 * bs);
  for (int64_t j = 0; j < n_ctx; ++j) {
    const int64_t slot = table[j / bs] * bs + j % bs;
    std::copy(&k[j * kv_stride], &k[(j + 1) * kv_stride],
              &pk[slot * kv_stride]);
    std::copy(&v[j * kv_stride], &v[(j + 1) * kv_stride],
              &pv[slot * kv_stride]);
    meta[slot] = {0, static_cast<int32_t>(j)};
  }
  const int64_t row = s.n_head * s.head_dim;
  for (int64_t n_q : {1, 5}) {
    std::vector<int32_t> pos(n_q);
    std::vector<KvEntryMeta> q_meta(n_q);
    for (int64_t t = 0; t < n_q; ++t) {
      pos[t] = static_cast<int32_t>(n_ctx - n_q + t);
      q_meta[t] = {0, pos[t]};
    }
    std::vector<float> q(n_q * row);
    for (float& e : q) e = dist(rng);
    std::vector<float> want(q.size()), got(q.size()), got_implicit(q.size());
    Attention(s, q.data(), pos.data(), n_q, k.data(), v.data(), want.data(),
              nullptr);
    const PagedAttentionSeq seq{0, n_q, n_ctx, table.data(), nullptr, 0};
    const std::vector<int32_t> token_seq(n_q, 0);
    PagedAttention(s, {pk.data(), pv.data(), meta.data(), bs}, q.data(),
                   q_meta.data(), &seq, token_seq.data(), n_q, got.data(),
                   nullptr);
    EXPECT_EQ(got, want) << n_q;
    // meta == nullptr means entry i is (0, i).
    PagedAttention(s, {pk.data(), pv.data(), nullptr, bs}, q.data(),
                   q_meta.data(), &seq, token_seq.data(), n_q,
                   got_implicit.data(), nullptr);
    EXPECT_EQ(got_implicit, want) << n_q;
  }
}

// The AVX-512 kernels (K and V rows shared by a KV head's query heads,
// scores reduced 16 keys at a time) and the AVX2 ones (the weighted V sums
// 8 dims a pass) give the scalar kernels' bits for every group size, head
// size, context length and kernel choice, alone and through a pool (which
// changes how heads are grouped into tasks).
TEST(AttentionTest, VectorPathsAreBitIdenticalToScalarPath) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar path";
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ThreadPool pool(2);
  // 0: the scalar path; 1: AVX2; 2: AVX-512 where the CPU has it.
  auto set_path = [](int path) {
    SetForceScalarForTesting(path == 0);
    SetDisableAvx512ForTesting(path == 1);
  };
  const int paths = UseAvx512() ? 3 : 2;
  for (int64_t head_dim : {64, 128}) {
    for (int64_t group : {1, 2, 3, 4, 5, 9}) {
      const AttentionShape s{2 * group, 2, head_dim};
      const int64_t n_ctx = 300;
      std::vector<uint16_t> k(n_ctx * s.n_kv_head * head_dim), v(k.size());
      for (auto& e : k) e = Fp32ToFp16(dist(rng));
      for (auto& e : v) e = Fp32ToFp16(dist(rng));
      const int32_t pos[6] = {0, 14, 15, 16, 64, 299};
      std::vector<float> q(6 * s.n_head * head_dim);
      for (float& e : q) e = dist(rng) * 3.0f;
      for (int64_t n_tok : {1, 6}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<std::vector<float>> out(paths,
                                              std::vector<float>(q.size()));
          const int64_t calls = n_tok == 1 ? 6 : 1;
          const int64_t row = s.n_head * head_dim;
          for (int path = 0; path < paths; ++path) {
            set_path(path);
            for (int64_t c = 0; c < calls; ++c) {
              Attention(s, q.data() + c * row, pos + c, n_tok, k.data(),
                        v.data(), out[path].data() + c * row, p);
            }
          }
          set_path(2);
          for (int path = 1; path < paths; ++path) {
            ASSERT_EQ(out[path], out[0])
                << "path " << path << " head_dim " << head_dim << " group "
                << group << " n_tok " << n_tok;
          }
        }
      }
    }
  }
}

// Branches (docs/MULTISTREAM.md): two streams after a shared prefix, their
// entries interleaved in one context, each seeing only the prefix and itself.
// Each branch's attention is bit-identical to an independent sequence holding
// the prefix and that branch alone, as a decode step and as a prefill chunk:
// what a query sees, not where it sits in the context, sets the arithmetic.
// Also as the second layer of a pass whose first found the views
// (PagedKvLayer::view_pass).
TEST(PagedAttentionTest, BranchEqualsIndependentSequenceBitForBit) {
  const AttentionShape s{9, 3, 64};
  const int64_t kv_stride = s.n_kv_head * s.head_dim;
  const int64_t bs = 16, prefix = 37, per_branch = 45;
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Rows of the prefix and of each branch.
  auto random_rows = [&](int64_t n) {
    std::vector<uint16_t> r(n * kv_stride);
    for (auto& e : r) e = Fp32ToFp16(dist(rng));
    return r;
  };
  const std::vector<uint16_t> kp = random_rows(prefix),
                              vp = random_rows(prefix);
  const std::vector<uint16_t> kb[2] = {random_rows(per_branch),
                                       random_rows(per_branch)};
  const std::vector<uint16_t> vb[2] = {random_rows(per_branch),
                                       random_rows(per_branch)};
  // The shared context: prefix (stream 0), then the branches interleaved.
  const int64_t n_ctx = prefix + 2 * per_branch;
  const int64_t n_blocks = (n_ctx + bs - 1) / bs;
  std::vector<uint16_t> k(n_blocks * bs * kv_stride), v(k.size());
  std::vector<KvEntryMeta> meta(n_blocks * bs);
  std::vector<int32_t> table(n_blocks);
  for (int64_t b = 0; b < n_blocks; ++b) table[b] = n_blocks - 1 - b;
  auto put = [&](int64_t j, const uint16_t* kr, const uint16_t* vr,
                 KvEntryMeta m) {
    const int64_t e = table[j / bs] * bs + j % bs;
    std::copy(kr, kr + kv_stride, &k[e * kv_stride]);
    std::copy(vr, vr + kv_stride, &v[e * kv_stride]);
    meta[e] = m;
  };
  for (int64_t i = 0; i < prefix; ++i) {
    put(i, &kp[i * kv_stride], &vp[i * kv_stride],
        {0, static_cast<int32_t>(i)});
  }
  for (int64_t i = 0; i < per_branch; ++i) {
    for (int b = 0; b < 2; ++b) {
      put(prefix + 2 * i + b, &kb[b][i * kv_stride], &vb[b][i * kv_stride],
          {b + 1, static_cast<int32_t>(prefix + i)});
    }
  }
  const int32_t sees_prefix[] = {0};
  const int64_t row = s.n_head * s.head_dim;
  ThreadPool pool(2);
  // Each thread's scratch, with the views it keeps within a pass.
  pool.RunOnEachThread([] { ReserveAttentionScratch(256); });
  for (int b = 0; b < 2; ++b) {
    // The independent sequence: prefix then branch b, contiguous.
    std::vector<uint16_t> ki(kp), vi(vp);
    ki.insert(ki.end(), kb[b].begin(), kb[b].end());
    vi.insert(vi.end(), vb[b].begin(), vb[b].end());
    for (int64_t n_q : {1, 7}) {
      std::vector<int32_t> pos(n_q);
      std::vector<KvEntryMeta> q_meta(n_q);
      for (int64_t t = 0; t < n_q; ++t) {
        pos[t] = static_cast<int32_t>(prefix + per_branch - n_q + t);
        q_meta[t] = {b + 1, pos[t]};
      }
      std::vector<float> q(n_q * row);
      for (float& e : q) e = dist(rng) * 2.0f;
      std::vector<float> want(q.size()), got(q.size());
      Attention(s, q.data(), pos.data(), n_q, ki.data(), vi.data(), want.data(),
                &pool);
      const PagedAttentionSeq seq{0, n_q, n_ctx, table.data(), sees_prefix, 1};
      const std::vector<int32_t> token_seq(n_q, 0);
      PagedAttention(s, {k.data(), v.data(), meta.data(), bs}, q.data(),
                     q_meta.data(), &seq, token_seq.data(), n_q, got.data(),
                     &pool);
      EXPECT_EQ(got, want) << "branch " << b << " n_q " << n_q;
      // As two layers of one forward pass (a view_pass): the views found
      // in the first call (other rows, the same entries and tags) serve
      // the second.
      const std::vector<uint16_t> other = random_rows(n_blocks * bs);
      std::vector<float> scratch(q.size());
      const uint64_t pass = 100 + 10 * b + n_q;
      PagedAttention(s, {other.data(), other.data(), meta.data(), bs, pass},
                     q.data(), q_meta.data(), &seq, token_seq.data(), n_q,
                     scratch.data(), &pool);
      PagedAttention(s, {k.data(), v.data(), meta.data(), bs, pass}, q.data(),
                     q_meta.data(), &seq, token_seq.data(), n_q, got.data(),
                     &pool);
      EXPECT_EQ(got, want) << "in a pass: branch " << b << " n_q " << n_q;
    }
  }
}

// One-token sequences over long contexts, too few to fill the pool as whole
// tasks, take PagedAttention's split phases (scores by key ranges, weighted
// sums by residue across the pool): the same bits as the one-task path (no
// pool), for a decode step and for a one-token prompt chunk (the batched
// kernel order), with two streams and scattered blocks.
TEST(PagedAttentionTest, LongContextSplitPhasesAreBitIdentical) {
  const AttentionShape s{9, 3, 64};
  const int64_t kv_stride = s.n_kv_head * s.head_dim;
  const int64_t bs = 16, n_blocks = 300;
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> k(n_blocks * bs * kv_stride), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng));
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  std::vector<int32_t> blocks(n_blocks);
  for (int32_t b = 0; b < n_blocks; ++b) blocks[b] = b;
  std::shuffle(blocks.begin(), blocks.end(), rng);
  // Sequence 0: 2,000 entries of one stream (decode step). Sequence 1:
  // 1,500 entries alternating streams 0 and 1, its query on stream 1 seeing
  // stream 0 (multi-stream), a one-token prompt chunk of a 40-token prompt.
  // (Two sequences x 3 KV heads are too few tasks for a pool of 2: split.)
  std::vector<KvEntryMeta> meta(n_blocks * bs);
  const int64_t ctx[2] = {2000, 1500};
  int64_t first_block = 0;
  std::vector<PagedAttentionSeq> seqs(2);
  const int32_t sees_zero[] = {0};
  std::vector<KvEntryMeta> q_meta;
  for (int i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < ctx[i]; ++j) {
      const int64_t e = blocks[first_block + j / bs] * bs + j % bs;
      meta[e] = i == 1 ? KvEntryMeta{static_cast<int32_t>(j % 2),
                                     static_cast<int32_t>(j / 2)}
                       : KvEntryMeta{0, static_cast<int32_t>(j)};
    }
    seqs[i] = {i,
               1,
               ctx[i],
               blocks.data() + first_block,
               i == 1 ? sees_zero : nullptr,
               i == 1 ? 1 : 0};
    q_meta.push_back(
        meta[blocks[first_block + (ctx[i] - 1) / bs] * bs + (ctx[i] - 1) % bs]);
    first_block += (ctx[i] + bs - 1) / bs;
  }
  seqs[1].kernel_tokens = 40;
  const std::vector<int32_t> token_seq = {0, 1};
  const int64_t row = s.n_head * s.head_dim;
  std::vector<float> q(2 * row);
  for (float& e : q) e = dist(rng) * 2.0f;
  const PagedKvLayer layer{k.data(), v.data(), meta.data(), bs};
  std::vector<float> want(q.size()), got(q.size());
  PagedAttention(s, layer, q.data(), q_meta.data(), seqs.data(),
                 token_seq.data(), 2, want.data(), nullptr);
  ThreadPool pool(2);
  const int64_t split_calls = internal::LongSplitCallsForTesting();
  PagedAttention(s, layer, q.data(), q_meta.data(), seqs.data(),
                 token_seq.data(), 2, got.data(), &pool);
  // (The split phases need the AVX-512 kernels.)
  EXPECT_EQ(internal::LongSplitCallsForTesting(),
            split_calls + (UseAvx512() ? 1 : 0));
  EXPECT_EQ(got, want);
  // The one-token prompt chunk takes the batched order: not the decode bits.
  seqs[1].kernel_tokens = 0;
  std::vector<float> decode_order(q.size());
  PagedAttention(s, layer, q.data(), q_meta.data(), seqs.data(),
                 token_seq.data(), 2, decode_order.data(), &pool);
  EXPECT_NE(std::vector<float>(decode_order.begin() + row,
                               decode_order.begin() + 2 * row),
            std::vector<float>(got.begin() + row, got.begin() + 2 * row));
}

// A sliding window, a score scale of its own and soft-capping (Gemma 2):
// a prompt chunk of 20 tokens at positions 60..79 over an 80-entry paged
// context, window 16, each query checked against a naive reference (the
// chunk's first tokens see entries the window takes from its last token's,
// so they take their own lists).
TEST(PagedAttentionTest, SlidingWindowAndSoftcapMatchNaiveReference) {
  AttentionShape s{4, 2, 32};
  s.scale = 0.3f;
  s.softcap = 2.5f;
  s.window = 16;
  const int64_t kv_stride = s.n_kv_head * s.head_dim;
  const int64_t bs = 8, n_ctx = 80, n_q = 20;
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<int32_t> table(n_ctx / bs);
  for (int32_t b = 0; b < n_ctx / bs; ++b) table[b] = n_ctx / bs - 1 - b;
  std::vector<uint16_t> k(n_ctx * kv_stride), v(k.size());
  for (auto& e : k) e = Fp32ToFp16(dist(rng) * 2.0f);
  for (auto& e : v) e = Fp32ToFp16(dist(rng));
  std::vector<KvEntryMeta> meta(n_ctx);
  for (int64_t j = 0; j < n_ctx; ++j) {
    meta[table[j / bs] * bs + j % bs] = {0, static_cast<int32_t>(j)};
  }
  std::vector<KvEntryMeta> q_meta;
  for (int64_t t = 0; t < n_q; ++t) {
    q_meta.push_back({0, static_cast<int32_t>(n_ctx - n_q + t)});
  }
  const int64_t row = s.n_head * s.head_dim;
  std::vector<float> q(n_q * row);
  for (float& e : q) e = dist(rng);
  const PagedAttentionSeq seq{0, n_q, n_ctx, table.data(), nullptr, 0};
  const std::vector<int32_t> token_seq(n_q, 0);
  const PagedKvLayer layer{k.data(), v.data(), meta.data(), bs};
  std::vector<float> out(q.size());
  ThreadPool pool(2);
  PagedAttention(s, layer, q.data(), q_meta.data(), &seq, token_seq.data(), n_q,
                 out.data(), &pool);
  const int64_t group = s.n_head / s.n_kv_head;
  for (int64_t t = 0; t < n_q; ++t) {
    const int64_t p = q_meta[t].y;
    const int64_t j0 = std::max<int64_t>(0, p - s.window + 1);
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* qh = q.data() + (t * s.n_head + h) * s.head_dim;
      std::vector<double> w;
      double max = -1e300, sum = 0;
      for (int64_t j = j0; j <= p; ++j) {
        const int64_t e = table[j / bs] * bs + j % bs;
        double d = 0;
        for (int64_t i = 0; i < s.head_dim; ++i) {
          d += Fp16ToFp32(Fp32ToFp16(qh[i])) *
               Fp16ToFp32(k[e * kv_stride + (h / group) * s.head_dim + i]);
        }
        w.push_back(s.softcap * std::tanh(d / s.softcap) * s.scale);
        max = std::max(max, w.back());
      }
      for (double& e : w) sum += (e = std::exp(e - max));
      for (int64_t i = 0; i < s.head_dim; ++i) {
        double acc = 0;
        for (int64_t j = j0; j <= p; ++j) {
          const int64_t e = table[j / bs] * bs + j % bs;
          acc += Fp16ToFp32(Fp32ToFp16(static_cast<float>(w[j - j0] / sum))) *
                 Fp16ToFp32(v[e * kv_stride + (h / group) * s.head_dim + i]);
        }
        ASSERT_NEAR(out[(t * s.n_head + h) * s.head_dim + i], acc, 1e-4)
            << "query " << t << " head " << h << " " << i;
      }
    }
  }
  // The window matters.
  s.window = 0;
  std::vector<float> full(q.size());
  PagedAttention(s, layer, q.data(), q_meta.data(), &seq, token_seq.data(), n_q,
                 full.data(), &pool);
  EXPECT_NE(full, out);
}

}  // namespace
}  // namespace braid::kernels::cpu
