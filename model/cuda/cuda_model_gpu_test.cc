// The CUDA model against the CPU model (the oracle) on random-weight Llama
// files of SmolLM2-135M's, Llama-3.2-1B's and Llama-3.1-8B's shapes (the
// larger ones with few layers, at full width): prefill and decode across
// block boundaries, branches sharing a prompt's blocks, and a multi-stream
// layout; logits NMSE <= 2e-3 at every step, no NaN or Inf. Needs a GPU
// (tools/gpu/check.sh).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/testing/device.h"
#include "model/cpu/llama.h"
#include "model/cuda/cuda_model.h"
#include "model/gguf.h"
#include "model/lookahead.h"
#include "model/testing/random_llama.h"

namespace braid::model {
namespace {

constexpr double kLogitsTolerance = 2e-3;
constexpr int kBlockSize = 16;
constexpr int kNumBlocks = 64;

struct Shape {
  const char* name;
  testing::RandomLlamaSpec spec;
};

std::vector<Shape> Shapes() {
  std::vector<Shape> out;
  testing::RandomLlamaSpec smol;  // SmolLM2-135M, all 30 layers
  smol.n_vocab = 49152;
  smol.n_embd = 576;
  smol.n_ff = 1536;
  smol.n_layer = 30;
  smol.n_head = 9;
  smol.n_head_kv = 3;
  smol.n_ctx_train = 8192;
  smol.fast_weights = true;  // the 8B shape's weights in seconds
  out.push_back({"smollm2-135m", smol});
  testing::RandomLlamaSpec l1b;  // Llama-3.2-1B at full width, 4 layers
  l1b.n_vocab = 128256;
  l1b.n_embd = 2048;
  l1b.n_ff = 8192;
  l1b.n_layer = 4;
  l1b.n_head = 32;
  l1b.n_head_kv = 8;
  l1b.n_ctx_train = 8192;
  l1b.rope_base = 500000.0f;
  l1b.matrix_type = GgmlType::kQ4_K;
  l1b.embedding_type = GgmlType::kQ6_K;
  out.push_back({"llama-1b", l1b});
  testing::RandomLlamaSpec l8b = l1b;  // Llama-3.1-8B, 2 layers
  l8b.n_embd = 4096;
  l8b.n_ff = 14336;
  l8b.n_layer = 2;
  l8b.n_head = 32;
  l8b.n_head_kv = 8;
  l8b.tied_embeddings = false;
  l8b.matrix_type = GgmlType::kQ5_K;
  out.push_back({"llama-8b", l8b});
  return out;
}

// The CPU and the CUDA model of one file, each with its cache, stepped on
// the same batches.
class Pair {
 public:
  explicit Pair(const testing::RandomLlamaSpec& spec) {
    const std::string image = testing::MakeRandomLlamaGguf(spec);
    auto f1 = GgufFile::FromBytes(image);
    auto f2 = GgufFile::FromBytes(image);
    EXPECT_TRUE(f1.ok() && f2.ok());
    auto cpu = LlamaModel::Load(*std::move(f1), LoadOptions{0});
    EXPECT_TRUE(cpu.ok()) << cpu.status();
    CudaLoadOptions opts;
    opts.max_tokens = 256;
    auto gpu = CudaModel::Load(*std::move(f2), opts);
    EXPECT_TRUE(gpu.ok()) << gpu.status();
    if (!cpu.ok() || !gpu.ok()) return;
    cpu_ = *std::move(cpu);
    gpu_ = *std::move(gpu);
    cpu_kv_ = cpu_->NewKvCache(kBlockSize, kNumBlocks);
    gpu_kv_ = gpu_->NewKvCache(kBlockSize, kNumBlocks);
  }
  bool ok() const { return gpu_ != nullptr && cpu_ != nullptr; }
  int n_vocab() const { return cpu_->info().n_vocab; }

  // Runs `b` on both; returns the CPU's logits after checking the GPU's.
  std::vector<float> Step(const Batch& b, const std::string& what) {
    std::vector<float> want, got;
    EXPECT_TRUE(cpu_->Forward(b, *cpu_kv_, &want).ok()) << what;
    absl::Status st = gpu_->Forward(b, *gpu_kv_, &got);
    EXPECT_TRUE(st.ok()) << what << ": " << st;
    EXPECT_EQ(got.size(), want.size()) << what;
    EXPECT_LE(kernels::cuda::testing::Nmse(got, want), kLogitsTolerance)
        << what;
    return want;
  }

 private:
  std::unique_ptr<LlamaModel> cpu_;
  std::unique_ptr<CudaModel> gpu_;
  std::unique_ptr<KvCache> cpu_kv_, gpu_kv_;
};

int ArgMax(const float* row, int n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

std::vector<int32_t> Table(int first, int count) {
  std::vector<int32_t> t(count);
  for (int i = 0; i < count; ++i) t[i] = first + i;
  return t;
}

// One sequence of `tokens` at stream 0, entries [cached, cached + n).
Batch OneSequence(const std::vector<int32_t>& tokens, int cached,
                  std::vector<int32_t> table) {
  Batch b;
  b.tokens = tokens;
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.meta.push_back({0, cached + static_cast<int32_t>(i)});
  }
  BatchSequence s;
  s.num_tokens = static_cast<int>(tokens.size());
  s.num_cached = cached;
  s.block_table = std::move(table);
  b.sequences.push_back(s);
  return b;
}

class CudaModelGpuTest : public ::testing::TestWithParam<Shape> {};

// A 37-token prompt in chunks of 20 and 17, then 24 greedy decode steps:
// the context crosses blocks 0 -> 3.
TEST_P(CudaModelGpuTest, PrefillAndDecodeMatchTheCpu) {
  Pair p(GetParam().spec);
  ASSERT_TRUE(p.ok());
  std::vector<int32_t> prompt(37);
  for (int i = 0; i < 37; ++i) prompt[i] = (i * 7919 + 13) % p.n_vocab();
  const std::vector<int32_t> table = Table(0, 5);
  p.Step(OneSequence({prompt.begin(), prompt.begin() + 20}, 0, table),
         "prefill chunk 1");
  std::vector<float> logits =
      p.Step(OneSequence({prompt.begin() + 20, prompt.end()}, 20, table),
             "prefill chunk 2");
  int pos = 37;
  for (int step = 0; step < 24; ++step, ++pos) {
    const int next = ArgMax(logits.data(), p.n_vocab());
    logits = p.Step(OneSequence({next}, pos, table),
                    "decode step " + std::to_string(step));
  }
}

// A 32-token prompt (two full blocks) shared by 4 branches decoding in one
// batch, each into its own third block; one of them asks for all rows.
TEST_P(CudaModelGpuTest, BranchesSharingAPromptMatchTheCpu) {
  Pair p(GetParam().spec);
  ASSERT_TRUE(p.ok());
  std::vector<int32_t> prompt(32);
  for (int i = 0; i < 32; ++i) prompt[i] = (i * 104729 + 5) % p.n_vocab();
  p.Step(OneSequence(prompt, 0, Table(0, 2)), "shared prompt");
  for (int step = 0; step < 6; ++step) {
    Batch b;
    for (int br = 0; br < 4; ++br) {
      BatchSequence s;
      s.first_token = static_cast<int>(b.tokens.size());
      s.num_tokens = br == 3 ? 2 : 1;
      s.num_cached = 32 + step * s.num_tokens;
      s.block_table = {0, 1, 2 + br};
      s.logits =
          br == 3 ? BatchSequence::Logits::kAll : BatchSequence::Logits::kLast;
      for (int j = 0; j < s.num_tokens; ++j) {
        b.tokens.push_back((br * 31 + step * 7 + j) % p.n_vocab());
        b.meta.push_back({0, s.num_cached + j});
      }
      b.sequences.push_back(s);
    }
    p.Step(b, "branches step " + std::to_string(step));
  }
}

// Three streams in one context (MULTISTREAM.md's aligned layout): a prompt
// on stream 0, then each step one token per stream at the same y; stream 1
// sees stream 0, stream 2 sees 0 and 1.
TEST_P(CudaModelGpuTest, MultiStreamLayoutMatchesTheCpu) {
  Pair p(GetParam().spec);
  ASSERT_TRUE(p.ok());
  std::vector<int32_t> prompt(20);
  for (int i = 0; i < 20; ++i) prompt[i] = (i * 613 + 1) % p.n_vocab();
  const std::vector<int32_t> table = Table(8, 6);
  p.Step(OneSequence(prompt, 0, table), "stream prompt");
  int cached = 20;
  for (int step = 0; step < 8; ++step) {
    Batch b;
    for (int stream = 0; stream < 3; ++stream) {
      BatchSequence s;
      s.first_token = stream;
      s.num_tokens = 1;
      s.num_cached = cached + stream;
      s.block_table = table;
      for (int v = 0; v < stream; ++v) s.visible_streams.push_back(v);
      b.tokens.push_back((step * 17 + stream * 5) % p.n_vocab());
      b.meta.push_back({stream, 20 + step});
      b.sequences.push_back(s);
    }
    // The three are one context: each sequence's entries so far, its own
    // included, lie in the shared table (they never write the same slot).
    p.Step(b, "streams step " + std::to_string(step));
    cached += 3;
  }
}

std::unique_ptr<CudaModel> LoadCuda(const std::string& image, bool graphs) {
  auto file = GgufFile::FromBytes(image);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  CudaLoadOptions opts;
  opts.max_tokens = 256;
  opts.cuda_graphs = graphs;
  auto model = CudaModel::Load(*std::move(file), opts);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// Decode steps of three sequences through graphs (a bucket of 4: one
// padding row writing the scratch slot; contexts crossing the 256-entry
// context bucket, so a second capture) give the eager steps' logits; and
// ForwardTop, run again on the same step, the host reduction of Forward's
// rows, and its temperature draws the host's.
TEST_P(CudaModelGpuTest, DecodeGraphsMatchEagerStepsAndForwardTopReduces) {
  const std::string image = testing::MakeRandomLlamaGguf(GetParam().spec);
  std::unique_ptr<CudaModel> eager = LoadCuda(image, false);
  std::unique_ptr<CudaModel> graph = LoadCuda(image, true);
  ASSERT_TRUE(eager != nullptr && graph != nullptr);
  const int n_vocab = eager->info().n_vocab;
  std::unique_ptr<KvCache> eager_kv = eager->NewKvCache(kBlockSize, kNumBlocks);
  std::unique_ptr<KvCache> graph_kv = graph->NewKvCache(kBlockSize, kNumBlocks);
  const int lengths[3] = {240, 250, 100};
  std::vector<int> next(3);
  for (int q = 0; q < 3; ++q) {
    std::vector<int32_t> prompt(lengths[q]);
    for (int i = 0; i < lengths[q]; ++i) {
      prompt[i] = (i * 7919 + q * 101) % n_vocab;
    }
    const Batch b = OneSequence(prompt, 0, Table(17 * q, 17));
    std::vector<float> want, got;
    ASSERT_TRUE(eager->Forward(b, *eager_kv, &want).ok());
    ASSERT_TRUE(graph->Forward(b, *graph_kv, &got).ok());
    next[q] = ArgMax(want.data(), n_vocab);
  }
  for (int step = 0; step < 24; ++step) {
    Batch b;
    for (int q = 0; q < 3; ++q) {
      BatchSequence s;
      s.first_token = q;
      s.num_tokens = 1;
      s.num_cached = lengths[q] + step;
      s.block_table = Table(17 * q, 17);
      b.tokens.push_back(next[q]);
      b.meta.push_back({0, s.num_cached});
      b.sequences.push_back(s);
    }
    const std::string what = "decode step " + std::to_string(step);
    std::vector<float> want, got;
    ASSERT_TRUE(eager->Forward(b, *eager_kv, &want).ok()) << what;
    absl::Status st = graph->Forward(b, *graph_kv, &got);
    ASSERT_TRUE(st.ok()) << what << ": " << st;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(kernels::cuda::testing::Nmse(got, want), 1e-5) << what;
    for (int q = 0; q < 3; ++q) {
      next[q] = ArgMax(want.data() + int64_t{q} * n_vocab, n_vocab);
    }
    if (step % 8 != 0) continue;
    // ForwardTop on the same step against the host's reduction of the rows
    // Forward returned: the same entries, bit for bit.
    const auto reduce = [&](const TopRequest& req, TopLogits* top,
                            TopLogits* host) {
      const absl::Status s = graph->ForwardTop(b, *graph_kv, req, top);
      ASSERT_TRUE(s.ok()) << what << ": " << s;
      ReduceLogits(got.data(), 3, n_vocab, req, host);
      EXPECT_EQ(top->ids, host->ids) << what;
      EXPECT_EQ(top->values, host->values) << what;
    };
    TopLogits top, host;
    reduce(TopRequest{50, true}, &top, &host);
    ASSERT_EQ(top.log_z.size(), 3u);
    for (int q = 0; q < 3; ++q) {
      EXPECT_NEAR(top.log_z[q], host.log_z[q],
                  1e-5 * std::max(1.0f, std::abs(host.log_z[q])))
          << what;
    }
    // Penalties applied on the device before the reduction (the rows'
    // likeliest tokens among those penalized).
    TopRequest penalized_req{50, false};
    penalized_req.penalties.resize(3);
    for (int q = 0; q < 3; ++q) {
      RowPenalties& p = penalized_req.penalties[q];
      p.repetition = 1.0f + 0.25f * q;
      p.frequency = 0.5f;
      p.presence = q == 1 ? -0.5f : 0.25f;
      std::set<int32_t> ids(host.ids.begin() + q * 50,
                            host.ids.begin() + q * 50 + 10);
      for (int i = 0; i < 64; ++i) ids.insert((i * 131 + q) % n_vocab);
      for (int32_t id : ids) {
        p.ids.push_back(id);
        p.output_counts.push_back(id % 3);
      }
    }
    TopLogits penalized, host_penalized;
    reduce(penalized_req, &penalized, &host_penalized);
    EXPECT_NE(penalized.ids, host.ids) << what;
    // A nucleus's request: each row's largest entries (as many as a
    // reduction holds) and its softmax denominator at the temperature (the
    // host's but for the order of the sum).
    TopLogits nucleus, host_nucleus;
    reduce(TopRequest{std::min(n_vocab, kMaxTopLogits),
                      false,
                      {{1.0f, -1.0}, {0.0f, 0.0}, {1.25f, -1.0}}},
           &nucleus, &host_nucleus);
    EXPECT_EQ(nucleus.drawn, std::vector<int32_t>(3, -1)) << what;
    ASSERT_EQ(nucleus.sums.size(), 3u);
    for (int q : {0, 2}) {
      EXPECT_NEAR(nucleus.sums[q], host_nucleus.sums[q],
                  1e-5 * host_nucleus.sums[q])
          << what;
    }
    // Temperature draws made on the device: the host's draws over the rows
    // Forward returned (u's away from any boundary but by chance).
    TopLogits drawn, host_drawn;
    reduce(TopRequest{1, false, {{1.0f, 0.3}, {0.0f, 0.0}, {1.25f, 0.77}}},
           &drawn, &host_drawn);
    EXPECT_EQ(drawn.drawn, host_drawn.drawn) << what;
  }
}

// Programmatic dependent launch changes when kernels start, never what
// they compute: eager and graph steps (prefill, then decode across blocks
// and a context bucket) with it on give the same logits, bit for bit, as
// the same kind of step with it off. The setting is the process's, so it
// is set before each model's step (a graph keeps the setting it was
// captured under).
TEST_P(CudaModelGpuTest, DependentLaunchChangesNoLogit) {
  int major = 0;
  ASSERT_EQ(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
      cudaSuccess);
  if (major < 9) GTEST_SKIP() << "PDL needs compute capability 9.0+";
  const std::string image = testing::MakeRandomLlamaGguf(GetParam().spec);
  struct Run {
    bool graphs, pdl;
    std::unique_ptr<CudaModel> model;
    std::unique_ptr<KvCache> kv;
    std::vector<float> logits;
  };
  std::vector<Run> runs;
  for (bool graphs : {false, true}) {
    for (bool pdl : {false, true}) {
      runs.push_back({graphs, pdl, LoadCuda(image, graphs), nullptr, {}});
      ASSERT_TRUE(runs.back().model != nullptr);
      runs.back().kv = runs.back().model->NewKvCache(kBlockSize, kNumBlocks);
    }
  }
  const int n_vocab = runs[0].model->info().n_vocab;
  const auto step = [&](const Batch& b, const std::string& what) {
    for (Run& r : runs) {
      kernels::cuda::SetDependentLaunch(r.pdl);
      const absl::Status st = r.model->Forward(b, *r.kv, &r.logits);
      ASSERT_TRUE(st.ok()) << what << ": " << st;
    }
    kernels::cuda::SetDependentLaunch(false);
    for (const Run& r : runs) {
      if (!r.pdl) continue;
      const Run& off = runs[r.graphs ? 2 : 0];
      ASSERT_EQ(r.logits.size(), off.logits.size()) << what;
      EXPECT_TRUE(r.logits == off.logits)
          << what << ", graphs " << r.graphs << ": NMSE "
          << kernels::cuda::testing::Nmse(r.logits, off.logits);
    }
  };
  std::vector<int32_t> prompt(250);
  for (int i = 0; i < 250; ++i) prompt[i] = (i * 7919 + 13) % n_vocab;
  step(OneSequence(prompt, 0, Table(0, 17)), "prefill");
  int token = ArgMax(runs[0].logits.data(), n_vocab);
  for (int i = 0; i < 16; ++i) {
    step(OneSequence({token}, 250 + i, Table(0, 17)),
         "decode step " + std::to_string(i));
    token = ArgMax(runs[0].logits.data(), n_vocab);
  }
}

// Greedy decoding of three sequences with a lookahead set before every
// step (each sequence a token further, its token the top-1 of its row)
// gives the tokens of plain ForwardTop steps; the lookahead steps answer
// the steps that match them, also with a finished sequence dropped, and a
// step that differs (a sequence's token replaced) runs anew.
TEST_P(CudaModelGpuTest, LookaheadStepsGiveThePlainStepsTokens) {
  const std::string image = testing::MakeRandomLlamaGguf(GetParam().spec);
  std::unique_ptr<CudaModel> plain = LoadCuda(image, true);
  std::unique_ptr<CudaModel> ahead = LoadCuda(image, true);
  ASSERT_TRUE(plain != nullptr && ahead != nullptr);
  const int n_vocab = plain->info().n_vocab;
  std::unique_ptr<KvCache> plain_kv = plain->NewKvCache(kBlockSize, kNumBlocks);
  std::unique_ptr<KvCache> ahead_kv = ahead->NewKvCache(kBlockSize, kNumBlocks);
  const TopRequest req{1, false};
  std::vector<int> cached = {20, 33, 47};
  std::vector<int32_t> next(3);
  for (int q = 0; q < 3; ++q) {
    std::vector<int32_t> prompt(cached[q]);
    for (int i = 0; i < cached[q]; ++i) prompt[i] = (i * 31 + q) % n_vocab;
    const Batch b = OneSequence(prompt, 0, Table(8 * q, 8));
    TopLogits a, c;
    ASSERT_TRUE(plain->ForwardTop(b, *plain_kv, req, &a).ok());
    ASSERT_TRUE(ahead->ForwardTop(b, *ahead_kv, req, &c).ok());
    ASSERT_EQ(a.ids, c.ids);
    next[q] = a.ids[0];
  }
  std::vector<int> live = {0, 1, 2};
  for (int step = 0; step < 30; ++step) {
    if (step == 20) live = {0, 2};  // sequence 1 finished
    Batch b, la;
    for (size_t j = 0; j < live.size(); ++j) {
      const int q = live[j];
      BatchSequence s;
      s.first_token = static_cast<int>(j);
      s.num_tokens = 1;
      s.num_cached = cached[q];
      s.block_table = Table(8 * q, 8);
      b.tokens.push_back(step == 25 && q == 2 ? 7 : next[q]);
      b.meta.push_back({0, cached[q]});
      b.sequences.push_back(s);
      s.num_cached += 1;
      la.sequences.push_back(s);
      la.tokens.push_back(AheadToken(static_cast<int>(j)));
      la.meta.push_back({0, cached[q] + 1});
    }
    const std::string what = "step " + std::to_string(step);
    TopLogits a, c;
    ASSERT_TRUE(plain->ForwardTop(b, *plain_kv, req, &a).ok()) << what;
    ahead->SetLookahead(&la);
    absl::Status st = ahead->ForwardTop(b, *ahead_kv, req, &c);
    ASSERT_TRUE(st.ok()) << what << ": " << st;
    EXPECT_EQ(a.ids, c.ids) << what;
    for (size_t j = 0; j < live.size(); ++j) {
      next[live[j]] = a.ids[j];
      ++cached[live[j]];
    }
  }
  // Every step but the first, the one after a sequence dropped out (no
  // lookahead is started from a subset of rows) and the one with the
  // replaced token came from a lookahead step.
  EXPECT_EQ(ahead->LookaheadHits(), 27);
  EXPECT_EQ(plain->LookaheadHits(), 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaModelGpuTest,
                         ::testing::ValuesIn(Shapes()),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace braid::model
