// LlamaModel::Forward over a paged KV pool: independent of the block layout,
// batch-invariant, deterministic, validating.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/gemm/packed_gemm.h"
#include "model/batch.h"
#include "model/cpu/llama.h"
#include "model/cpu/paged_kv.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"
#include "model/testing/sequence_runner.h"

namespace braid::model {
namespace {

constexpr int kBlockSize = 4;

std::unique_ptr<LlamaModel> LoadRandom(GgmlType type, int threads = 2,
                                       bool packed = false) {
  testing::RandomLlamaSpec spec;
  spec.matrix_type = type;
  spec.n_ctx_train = 512;
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  EXPECT_TRUE(file.ok()) << file.status();
  LoadOptions opts{threads};
  opts.packed_matmul = packed;
  auto model = LlamaModel::Load(*std::move(file), opts);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// One sequence's state: its tokens so far and its blocks.
struct Seq {
  std::vector<int32_t> table;
  int num_cached = 0;
};

// Appends `tokens` of `seq` (stream 0, y = context index) to `batch`.
void Add(Batch& batch, Seq& seq, const std::vector<int32_t>& tokens,
         BatchSequence::Logits logits) {
  BatchSequence bs;
  bs.first_token = static_cast<int>(batch.tokens.size());
  bs.num_tokens = static_cast<int>(tokens.size());
  bs.num_cached = seq.num_cached;
  bs.block_table = seq.table;
  bs.logits = logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.tokens.push_back(tokens[i]);
    batch.meta.push_back(EntryMeta{0, seq.num_cached + static_cast<int>(i)});
  }
  batch.sequences.push_back(std::move(bs));
}

// Decodes `steps` greedy tokens of `seq` (its prompt cached) one at a time,
// then recomputes them as one chunk with one-token kernels in the same
// blocks (as the scheduler recomputes a preempted request's outputs) and
// expects every row's logits bit for bit.
void ExpectDecodingEqualsRecompute(LlamaModel& model, PagedKvPool& pool,
                                   Seq seq, int steps) {
  const int prompt_len = seq.num_cached;
  std::vector<float> got, want;  // want: each decode step's logits
  std::vector<int32_t> decoded;
  int32_t next = 17;
  for (int step = 0; step < steps; ++step) {
    Batch b;
    Add(b, seq, {next}, BatchSequence::Logits::kLast);
    ASSERT_TRUE(model.Forward(b, pool, &got).ok());
    ++seq.num_cached;
    decoded.push_back(next);
    want.insert(want.end(), got.begin(), got.end());
    next = static_cast<int32_t>(std::max_element(got.begin(), got.end()) -
                                got.begin());
  }
  // The same blocks: the prompt's entries stay, the outputs are rewritten.
  Seq again{seq.table, prompt_len};
  Batch b;
  Add(b, again, decoded, BatchSequence::Logits::kAll);
  b.sequences[0].kernel_tokens = 1;
  ASSERT_TRUE(model.Forward(b, pool, &got).ok());
  EXPECT_EQ(got, want);
}

// Parameters: the matrix type, and LoadOptions::packed_matmul (both
// arithmetics must be batch-invariant and deterministic).
class PagedForwardTest
    : public ::testing::TestWithParam<std::tuple<GgmlType, bool>> {
 protected:
  std::unique_ptr<LlamaModel> Load() {
    return LoadRandom(std::get<0>(GetParam()), 2, std::get<1>(GetParam()));
  }
};

// Prefill then decode through the paged pool in scrambled, non-contiguous
// small blocks gives exactly the logits of one contiguous block.
TEST_P(PagedForwardTest, OneSequenceEqualsContiguousPathBitForBit) {
  auto model = Load();
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = {1, 5, 9, 33, 2, 95, 60, 7, 7, 40, 3};
  testing::SequenceRunner cache(*model, 32, /*block_size=*/32);
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 10);
  Seq seq{{6, 2, 9, 0, 4, 1}, 0};
  std::vector<float> want, got;
  ASSERT_TRUE(cache.Forward(prompt, true, &want).ok());
  Batch batch;
  Add(batch, seq, prompt, BatchSequence::Logits::kAll);
  ASSERT_TRUE(model->Forward(batch, pool, &got).ok());
  seq.num_cached += prompt.size();
  ASSERT_EQ(got, want);
  int32_t next = 17;
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(cache.Forward({next}, false, &want).ok());
    Batch b;
    Add(b, seq, {next}, BatchSequence::Logits::kLast);
    ASSERT_TRUE(model->Forward(b, pool, &got).ok());
    ++seq.num_cached;
    ASSERT_EQ(got, want) << "step " << step;
    next = static_cast<int32_t>(std::max_element(got.begin(), got.end()) -
                                got.begin());
  }
}

// Decoded tokens recomputed as one chunk with kernel_tokens = 1 (as the
// scheduler recomputes a preempted request's outputs) give every row the
// logits it had when decoded one at a time, bit for bit, in every weight
// type and both arithmetics (llama_smollm2_test shows on the real model
// that the chunk's own kernels would differ).
TEST_P(PagedForwardTest, RecomputedOutputsWithOneTokenKernelsEqualDecoding) {
  auto model = Load();
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 60; ++i) prompt.push_back((i * 37 + 5) % n_vocab);
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 24);
  Seq seq{{}, 0};
  for (int b = 0; b < 18; ++b) seq.table.push_back((b * 7) % 24);
  std::vector<float> got;
  Batch batch;
  Add(batch, seq, prompt, BatchSequence::Logits::kLast);
  ASSERT_TRUE(model->Forward(batch, pool, &got).ok());
  seq.num_cached += prompt.size();
  ExpectDecodingEqualsRecompute(*model, pool, seq, 9);
}

// Past 1024 entries a lone one-token sequence takes attention's long-context
// phases (attention_long.cc), and with head size 64 the O projection's
// input is quantized as attention finishes it: decode steps there give the
// logits of the same tokens recomputed as one chunk with one-token kernels
// (the per-task path), bit for bit.
TEST(PagedForwardTest, LongContextDecodeEqualsRecompute) {
  testing::RandomLlamaSpec spec;
  spec.n_embd = 256;  // head size 64
  spec.n_ff = 128;
  spec.n_ctx_train = 2048;
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  ASSERT_TRUE(file.ok()) << file.status();
  auto loaded = LlamaModel::Load(*std::move(file), LoadOptions{2});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LlamaModel& model = **loaded;
  ASSERT_EQ(model.config().head_dim, 64);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 1100; ++i) prompt.push_back((i * 37 + 5) % spec.n_vocab);
  constexpr int kBlock = 16;
  PagedKvPool pool = model.NewPagedKvPool(kBlock, 80);
  Seq seq{{}, 0};
  for (int b = 0; b < 72; ++b) seq.table.push_back((b * 13) % 80);
  std::vector<float> got;
  for (size_t at = 0; at < prompt.size(); at += 256) {
    Batch batch;
    Add(batch, seq,
        std::vector<int32_t>(
            prompt.begin() + at,
            prompt.begin() + std::min(prompt.size(), at + 256)),
        BatchSequence::Logits::kLast);
    ASSERT_TRUE(model.Forward(batch, pool, &got).ok());
    seq.num_cached += batch.tokens.size();
  }
  ExpectDecodingEqualsRecompute(model, pool, seq, 4);
}

// The thread count changes no bit: a prompt and decode steps give the same
// logits on 1, 2 and 3 threads (every task computes whole output elements).
TEST_P(PagedForwardTest, ThreadCountChangesNoBit) {
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 3}) {
    auto model =
        LoadRandom(std::get<0>(GetParam()), threads, std::get<1>(GetParam()));
    ASSERT_NE(model, nullptr);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 70; ++i) prompt.push_back((i * 29 + 3) % 96);
    testing::SequenceRunner run(*model, 80);
    std::vector<float> all, logits;
    ASSERT_TRUE(run.Forward(prompt, true, &logits).ok());
    all = logits;
    for (int step = 0; step < 5; ++step) {
      ASSERT_TRUE(
          run.Forward({static_cast<int32_t>(step * 7 + 1)}, false, &logits)
              .ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    runs.push_back(std::move(all));
  }
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[2], runs[0]);
}

// 16 sequences of different lengths, prefilled and then decoded together,
// give bit-identical logits to each run alone; and a rerun repeats them.
TEST_P(PagedForwardTest, BatchOfSixteenEqualsEachAloneAndIsDeterministic) {
  auto model = Load();
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  constexpr int kSeqs = 16, kSteps = 3;
  std::mt19937 rng(42);
  std::vector<std::vector<int32_t>> prompts(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    prompts[i].resize(1 + i % 7 + i);
    for (int32_t& t : prompts[i]) t = static_cast<int32_t>(rng() % n_vocab);
  }
  // Every sequence gets its own blocks, interleaved across the pool.
  const int blocks_per_seq = 10;
  std::vector<Seq> layout(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    for (int b = 0; b < blocks_per_seq; ++b) {
      layout[i].table.push_back(b * kSeqs + (i * 5 + b) % kSeqs);
    }
  }
  const int num_blocks = kSeqs * blocks_per_seq;
  // Logits per sequence per step (step 0 = all prompt rows, then decode).
  using Trace = std::vector<std::vector<std::vector<float>>>;
  auto next_tokens = [&](int i, int step) {
    // Fixed decode inputs (so both runs feed the same tokens), sometimes two
    // tokens in one step to mix one- and multi-token sequences; the last
    // step one token each, so it runs data-parallel (8 + 8 on 2 threads).
    std::vector<int32_t> t = {static_cast<int32_t>((i * 13 + step) % n_vocab)};
    if ((i + step) % 4 == 0 && step < kSteps) {
      t.push_back((i + 3 * step) % n_vocab);
    }
    return t;
  };
  auto run_alone = [&]() {
    Trace trace(kSeqs);
    PagedKvPool pool = model->NewPagedKvPool(kBlockSize, num_blocks);
    std::vector<float> logits;
    for (int i = 0; i < kSeqs; ++i) {
      Seq seq = layout[i];
      for (int step = 0; step <= kSteps; ++step) {
        const std::vector<int32_t> in =
            step == 0 ? prompts[i] : next_tokens(i, step);
        Batch b;
        Add(b, seq, in, BatchSequence::Logits::kAll);
        EXPECT_TRUE(model->Forward(b, pool, &logits).ok());
        seq.num_cached += in.size();
        trace[i].push_back(logits);
      }
    }
    return trace;
  };
  auto run_batched = [&]() {
    Trace trace(kSeqs);
    PagedKvPool pool = model->NewPagedKvPool(kBlockSize, num_blocks);
    std::vector<Seq> seqs = layout;
    std::vector<float> logits;
    for (int step = 0; step <= kSteps; ++step) {
      Batch b;
      for (int i = 0; i < kSeqs; ++i) {
        Add(b, seqs[i], step == 0 ? prompts[i] : next_tokens(i, step),
            BatchSequence::Logits::kAll);
      }
      EXPECT_TRUE(model->Forward(b, pool, &logits).ok());
      size_t row = 0;
      for (int i = 0; i < kSeqs; ++i) {
        const int n = b.sequences[i].num_tokens;
        trace[i].emplace_back(logits.begin() + row * n_vocab,
                              logits.begin() + (row + n) * n_vocab);
        row += n;
        seqs[i].num_cached += n;
      }
      EXPECT_EQ(row * n_vocab, logits.size());
    }
    return trace;
  };
  const Trace alone = run_alone();
  const int64_t parallel = model->data_parallel_steps();
  const Trace batched = run_batched();
  // The decode steps (16-20 tokens, 2 threads) ran data-parallel.
  EXPECT_GT(model->data_parallel_steps(), parallel);
  for (int i = 0; i < kSeqs; ++i) {
    for (int step = 0; step <= kSteps; ++step) {
      ASSERT_EQ(batched[i][step], alone[i][step])
          << "sequence " << i << " step " << step;
    }
  }
  EXPECT_EQ(run_batched(), batched);
}

// 8 one-token sequences on 2 threads (4 a thread) run row- or
// data-parallel, whichever has been faster (SplitChooser), trying both
// first: over 20 decode steps both ways run, and every step's logits equal
// one thread's, bit for bit.
TEST(PagedForwardTest, EightSequencesEitherWayEqualOneThread) {
  auto run = [](LlamaModel& model) {
    constexpr int kSeqs = 8, kSteps = 20;
    PagedKvPool pool = model.NewPagedKvPool(kBlockSize, kSeqs * 8);
    std::vector<Seq> seqs(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
      for (int b = 0; b < 8; ++b) seqs[i].table.push_back(b * kSeqs + i);
    }
    std::vector<float> logits, all;
    for (int step = 0; step < kSteps; ++step) {
      Batch b;
      for (int i = 0; i < kSeqs; ++i) {
        Add(b, seqs[i], {(i * 11 + step * 7 + 1) % 96},
            BatchSequence::Logits::kLast);
        ++seqs[i].num_cached;
      }
      EXPECT_TRUE(model.Forward(b, pool, &logits).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto one = LoadRandom(GgmlType::kQ4_1, 1);
  auto two = LoadRandom(GgmlType::kQ4_1, 2);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(run(*two), run(*one));
  EXPECT_GT(two->data_parallel_steps(), 0);
  EXPECT_LT(two->data_parallel_steps(), 20);
}

// A data-parallel step keeps sequences that read entries another writes in
// the same step (two streams of one context, the second seeing the first's
// new entries) in one part: with the two streams adjacent, the step is
// split around them (8 + 8 tokens); with eight sequences between them the
// even cut (8 + 8) would part them, so it runs row-parallel. Two branches
// of the context (each seeing the prefix and itself) write into the same
// blocks but do not meet: the even cut parts them. Either way its logits
// equal one thread's.
TEST(PagedForwardTest, StreamsOfOneContextStayInOnePart) {
  // Streams 1 and 2 of a context at y = 8..11, their entries at 8..11 and
  // 12..15, and `between` + `after` one-token sequences of their own.
  auto run = [](LlamaModel& model, int between, int after, bool branches) {
    PagedKvPool pool = model.NewPagedKvPool(kBlockSize, 48);
    Seq ctx;
    for (int b = 0; b < 8; ++b) ctx.table.push_back(47 - b);
    std::vector<float> logits;
    Batch prefix;
    Add(prefix, ctx, {5, 9, 14, 2, 7, 30, 11, 4}, BatchSequence::Logits::kNone);
    EXPECT_TRUE(model.Forward(prefix, pool, &logits).ok());
    Batch step;
    auto stream = [&](int id, int num_cached, std::vector<int32_t> visible) {
      BatchSequence seq;
      seq.first_token = static_cast<int>(step.tokens.size());
      seq.num_tokens = 4;
      seq.num_cached = num_cached;
      seq.block_table = ctx.table;
      seq.visible_streams = std::move(visible);
      seq.logits = BatchSequence::Logits::kAll;
      for (int j = 0; j < 4; ++j) {
        step.tokens.push_back((id * 17 + j * 5) % 96);
        step.meta.push_back(EntryMeta{id, 8 + j});
      }
      step.sequences.push_back(std::move(seq));
    };
    int own = 0;
    auto singles = [&](int count) {
      for (int i = 0; i < count; ++i, ++own) {
        Seq seq{{own}, 0};
        Add(step, seq, {(own * 7 + 1) % 96}, BatchSequence::Logits::kLast);
      }
    };
    stream(1, 8, {0});
    singles(between);
    stream(2, 12,
           branches ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1});
    singles(after);
    EXPECT_TRUE(model.Forward(step, pool, &logits).ok());
    return logits;
  };
  auto one = LoadRandom(GgmlType::kQ4_1, 1);
  ASSERT_NE(one, nullptr);
  for (const auto& [between, after, branches, parallel] :
       {std::tuple<int, int, bool, int>{8, 0, false, 0},
        std::tuple<int, int, bool, int>{0, 8, false, 1},
        std::tuple<int, int, bool, int>{8, 0, true, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << between << " between, " << after << " after"
                 << (branches ? ", branches" : ""));
    auto two = LoadRandom(GgmlType::kQ4_1, 2);
    ASSERT_NE(two, nullptr);
    EXPECT_EQ(run(*two, between, after, branches),
              run(*one, between, after, branches));
    EXPECT_EQ(two->data_parallel_steps(), parallel);
  }
}

INSTANTIATE_TEST_SUITE_P(
    WeightTypes, PagedForwardTest,
    ::testing::Combine(::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1,
                                         GgmlType::kQ8_0, GgmlType::kF16,
                                         GgmlType::kBF16, GgmlType::kF32),
                       ::testing::Bool()));

// Packed products are used when asked for (where the CPU runs them) and
// change the logits only in the last bits.
TEST(PagedForwardTest, PackedMatmulIsUsedAndCloseToGgmlArithmetic) {
  auto ggml = LoadRandom(GgmlType::kQ4_1, 2, false);
  auto packed = LoadRandom(GgmlType::kQ4_1, 2, true);
  ASSERT_TRUE(ggml && packed);
  std::vector<int32_t> prompt = {1, 5, 9, 14, 3, 7, 22, 40};
  testing::SequenceRunner a(*ggml, 64), b(*packed, 64);
  std::vector<float> la, lb;
  ASSERT_TRUE(a.Forward(prompt, false, &la).ok());
  ASSERT_TRUE(b.Forward(prompt, false, &lb).ok());
  ASSERT_EQ(la.size(), lb.size());
  double dot = 0, a2 = 0, b2 = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    dot += double{la[i]} * lb[i];
    a2 += double{la[i]} * la[i];
    b2 += double{lb[i]} * lb[i];
  }
  EXPECT_GT(dot / std::sqrt(a2 * b2), 0.9999);
  if (kernels::cpu::UsesPackedActivations(kernels::cpu::DType::kQ4_1)) {
    EXPECT_NE(la, lb) << "packed products were not used";
  }
}

TEST(PagedForwardTest, LogitsRowsFollowEachSequencesRequest) {
  auto model = LoadRandom(GgmlType::kQ4_1);
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 8);
  Seq a{{0, 1}, 0}, b{{2, 3}, 0}, c{{4, 5}, 0};
  Batch batch;
  Add(batch, a, {1, 2, 3}, BatchSequence::Logits::kNone);
  Add(batch, b, {4, 5}, BatchSequence::Logits::kAll);
  Add(batch, c, {6, 7, 8}, BatchSequence::Logits::kLast);
  std::vector<float> logits;
  ASSERT_TRUE(model->Forward(batch, pool, &logits).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(3 * n_vocab));
  // c's last row equals c alone with last-only logits.
  PagedKvPool pool2 = model->NewPagedKvPool(kBlockSize, 8);
  Batch alone;
  Add(alone, c, {6, 7, 8}, BatchSequence::Logits::kLast);
  std::vector<float> want;
  ASSERT_TRUE(model->Forward(alone, pool2, &want).ok());
  EXPECT_EQ(std::vector<float>(logits.begin() + 2 * n_vocab, logits.end()),
            want);
}

// Two streams sharing a prompt: computing the streams' entries in one chunk
// gives the same logits (up to kernel-choice rounding) as step by step, and
// the second stream changes what the first sees only from the next y on.
TEST(PagedForwardTest, TwoStreamChunkEqualsStepByStep) {
  auto model = LoadRandom(GgmlType::kQ8_0);
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  const std::vector<int32_t> s0 = {35, 89, 79}, s1 = {32, 38, 46};
  const int y0 = static_cast<int>(prompt.size());
  auto build = [&](Batch& b, int first_y, int last_y, int num_cached) {
    BatchSequence seq;
    seq.first_token = 0;
    seq.num_cached = num_cached;
    seq.block_table = {3, 1, 4, 0};
    seq.visible_streams = {0, 1};
    seq.logits = BatchSequence::Logits::kAll;
    for (int y = first_y; y < last_y; ++y) {
      if (y < y0) {
        b.tokens.push_back(prompt[y]);
        b.meta.push_back({0, y});
      } else {
        b.tokens.push_back(s0[y - y0]);
        b.meta.push_back({0, y});
        b.tokens.push_back(s1[y - y0]);
        b.meta.push_back({1, y});
      }
    }
    seq.num_tokens = static_cast<int>(b.tokens.size());
    b.sequences.push_back(seq);
  };
  PagedKvPool chunk_pool = model->NewPagedKvPool(kBlockSize, 5);
  Batch all;
  build(all, 0, y0 + 3, 0);
  std::vector<float> chunk;
  ASSERT_TRUE(model->Forward(all, chunk_pool, &chunk).ok());

  PagedKvPool step_pool = model->NewPagedKvPool(kBlockSize, 5);
  std::vector<float> steps, logits;
  int cached = 0;
  for (int y = 0; y < y0 + 3; ++y) {
    Batch b;
    build(b, y, y + 1, cached);
    ASSERT_TRUE(model->Forward(b, step_pool, &logits).ok());
    cached += static_cast<int>(b.tokens.size());
    steps.insert(steps.end(), logits.begin(), logits.end());
  }
  ASSERT_EQ(steps.size(), chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) {
    ASSERT_NEAR(steps[i], chunk[i], 1e-3 * (1 + std::fabs(chunk[i]))) << i;
  }
}

TEST(PagedForwardTest, RejectsBadBatches) {
  auto model = LoadRandom(GgmlType::kQ4_1, 1);
  ASSERT_NE(model, nullptr);
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 4);
  Seq seq{{0, 1}, 0};
  Batch good;
  Add(good, seq, {1, 2, 3}, BatchSequence::Logits::kLast);
  std::vector<float> logits = {1.0f};
  const auto invalid = [&](const Batch& b) {
    return model->Forward(b, pool, &logits).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid(Batch{}));
  Batch b = good;
  b.tokens[1] = 96;  // n_vocab
  EXPECT_TRUE(invalid(b));
  b = good;
  b.tokens[1] = -1;
  EXPECT_TRUE(invalid(b));
  b = good;
  b.meta.pop_back();
  EXPECT_TRUE(invalid(b));
  b = good;
  b.meta[0].y = -1;
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].num_tokens = 2;  // Leaves a token uncovered.
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].first_token = 1;
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].num_cached = 6;  // 9 entries need 3 blocks.
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].num_cached = -1;
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].block_table = {0, 4};
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences[0].block_table = {-1};
  EXPECT_TRUE(invalid(b));
  b = good;
  b.sequences.push_back(b.sequences[0]);  // Overlapping ranges.
  EXPECT_TRUE(invalid(b));
  EXPECT_EQ(logits, std::vector<float>{1.0f});  // Untouched on error.
  PagedKvPool wrong(1, 32, kBlockSize, 4);
  EXPECT_EQ(model->Forward(good, wrong, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(model->Forward(good, pool, &logits).ok());
}

}  // namespace
}  // namespace braid::model
