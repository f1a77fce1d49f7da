// The CUDA paged attention (attention.h) against kernels/cpu's
// PagedAttention, the oracle, on random inputs: decode and prefill, one
// sequence and several, contexts crossing blocks in scrambled block tables,
// long contexts (split contexts and their combine), GQA, head sizes 64, 128
// and 256, a sliding window, soft-capping, multi-stream layouts and branches
// sharing prefix blocks, and a call captured in a CUDA graph replayed with
// new contents. Tolerance: NMSE <= 1e-4 per case (fp16 K, V, queries and
// weights on both sides; the sums' orders differ). Needs a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/testing/device.h"

namespace braid::kernels::cuda {
namespace {

using cpu::KvEntryMeta;
using testing::Download;
using testing::Nmse;
using testing::RandomFloats;
using testing::Upload;

constexpr double kTolerance = 1e-4;
constexpr uint16_t kFp16Nan = 0x7E00;

// A sequence of a case: its context's tags in order, its queries' tags, the
// streams it sees besides each query's own, and optionally the first blocks
// of an earlier sequence's table (a branch sharing a prompt).
struct SeqSpec {
  std::vector<KvEntryMeta> ctx;
  std::vector<KvEntryMeta> queries;
  std::vector<int32_t> visible;
  int share_from = -1;
  int shared_blocks = 0;
};

struct Case {
  std::string name;
  cpu::AttentionShape shape;
  int block_size = 16;
  std::vector<SeqSpec> seqs;
  bool expect_split = false;  // the call splits its contexts
  // All queries 0: every score is 0 and a query's output is the mean of the
  // V rows it sees, whatever the score path does (a failure here and not
  // elsewhere points at the scores; here too, at the masks or the V sums).
  bool zero_queries = false;
};

// One stream, entries (stream, 0..n_ctx-1); the last n_tokens are queries.
SeqSpec Causal(int n_ctx, int n_tokens, int32_t stream = 0) {
  SeqSpec s;
  for (int j = 0; j < n_ctx; ++j) s.ctx.push_back({stream, j});
  s.queries.assign(s.ctx.end() - n_tokens, s.ctx.end());
  return s;
}

// The aligned layout: stream 0's prefix at y < y0, then streams
// 0..n_streams-1 at every y0 <= y < y_end, interleaved entry by entry.
std::vector<KvEntryMeta> AlignedContext(int y0, int y_end, int n_streams) {
  std::vector<KvEntryMeta> ctx;
  for (int y = 0; y < y0; ++y) ctx.push_back({0, y});
  for (int y = y0; y < y_end; ++y) {
    for (int s = 0; s < n_streams; ++s) ctx.push_back({s, y});
  }
  return ctx;
}

// A call's inputs on the host: the pool of one layer (entries outside every
// context are NaN, so reading one unmasked shows), the sequences and the
// queries.
struct HostBatch {
  cpu::AttentionShape shape;
  int block_size = 0;
  std::vector<uint16_t> k, v;
  std::vector<KvEntryMeta> meta;
  std::vector<std::vector<int32_t>> tables, visible;
  std::vector<int> num_ctx, first_token, num_tokens;
  std::vector<KvEntryMeta> q_meta;
  std::vector<float> q;
};

HostBatch BuildBatch(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  HostBatch b;
  b.shape = c.shape;
  b.block_size = c.block_size;
  const int bs = c.block_size;
  const int64_t kv_dim = c.shape.n_kv_head * c.shape.head_dim;
  int blocks = 3;  // spare blocks, never in a context
  for (const SeqSpec& s : c.seqs) {
    blocks += (static_cast<int>(s.ctx.size()) + bs - 1) / bs - s.shared_blocks;
  }
  std::vector<int32_t> free_blocks(blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  b.k.assign(int64_t{blocks} * bs * kv_dim, kFp16Nan);
  b.v = b.k;
  b.meta.assign(int64_t{blocks} * bs, KvEntryMeta{99, 1 << 30});
  for (const SeqSpec& s : c.seqs) {
    const int n_ctx = static_cast<int>(s.ctx.size());
    std::vector<int32_t> table;
    if (s.share_from >= 0) {
      const std::vector<int32_t>& from = b.tables[s.share_from];
      table.assign(from.begin(), from.begin() + s.shared_blocks);
    }
    for (int j = s.shared_blocks * bs; j < n_ctx; ++j) {
      if (j % bs == 0) {
        table.push_back(free_blocks.back());
        free_blocks.pop_back();
      }
      const int64_t slot = int64_t{table[j / bs]} * bs + j % bs;
      b.meta[slot] = s.ctx[j];
      for (int64_t i = 0; i < kv_dim; ++i) {
        b.k[slot * kv_dim + i] = cpu::Fp32ToFp16(dist(rng));
        b.v[slot * kv_dim + i] = cpu::Fp32ToFp16(dist(rng));
      }
    }
    for (int j = 0; j < s.shared_blocks * bs; ++j) {
      const KvEntryMeta m = b.meta[int64_t{table[j / bs]} * bs + j % bs];
      EXPECT_TRUE(m.stream == s.ctx[j].stream && m.y == s.ctx[j].y)
          << c.name << ": a shared block holds other entries";
    }
    b.tables.push_back(table);
    b.visible.push_back(s.visible);
    b.num_ctx.push_back(n_ctx);
    b.first_token.push_back(static_cast<int>(b.q_meta.size()));
    b.num_tokens.push_back(static_cast<int>(s.queries.size()));
    b.q_meta.insert(b.q_meta.end(), s.queries.begin(), s.queries.end());
  }
  const size_t q_size = b.q_meta.size() * c.shape.n_head * c.shape.head_dim;
  b.q = c.zero_queries ? std::vector<float>(q_size)
                       : RandomFloats(q_size, seed + 1);
  return b;
}

std::vector<float> CpuAttention(const HostBatch& b) {
  std::vector<cpu::PagedAttentionSeq> seqs;
  std::vector<int32_t> token_seq;
  for (size_t i = 0; i < b.tables.size(); ++i) {
    seqs.push_back({b.first_token[i], b.num_tokens[i], b.num_ctx[i],
                    b.tables[i].data(), b.visible[i].data(),
                    static_cast<int64_t>(b.visible[i].size())});
    token_seq.insert(token_seq.end(), b.num_tokens[i], static_cast<int>(i));
  }
  std::vector<float> out(b.q.size());
  cpu::ThreadPool pool(2);
  const cpu::PagedKvLayer layer{b.k.data(), b.v.data(), b.meta.data(),
                                b.block_size};
  cpu::PagedAttention(b.shape, layer, b.q.data(), b.q_meta.data(), seqs.data(),
                      token_seq.data(), static_cast<int64_t>(b.q_meta.size()),
                      out.data(), &pool);
  return out;
}

CudaAttentionShape CudaShape(const HostBatch& b) {
  const cpu::AttentionShape& s = b.shape;
  return {static_cast<int>(s.n_head),
          static_cast<int>(s.n_kv_head),
          static_cast<int>(s.head_dim),
          b.block_size,
          s.scale,
          s.window,
          s.softcap};
}

std::vector<CudaEntryMeta> CudaMetas(const std::vector<KvEntryMeta>& m) {
  std::vector<CudaEntryMeta> out;
  for (const KvEntryMeta& e : m) out.push_back({e.stream, e.y});
  return out;
}

// The sequences' descriptors with the tables and visible lists
// concatenated.
std::vector<CudaAttentionSeq> Descriptors(const HostBatch& b,
                                          std::vector<int32_t>* tables,
                                          std::vector<int32_t>* visible) {
  std::vector<CudaAttentionSeq> seqs;
  tables->clear();
  visible->clear();
  for (size_t i = 0; i < b.tables.size(); ++i) {
    seqs.push_back({b.first_token[i], b.num_tokens[i], b.num_ctx[i],
                    static_cast<int32_t>(tables->size()),
                    static_cast<int32_t>(visible->size()),
                    static_cast<int32_t>(b.visible[i].size())});
    tables->insert(tables->end(), b.tables[i].begin(), b.tables[i].end());
    visible->insert(visible->end(), b.visible[i].begin(), b.visible[i].end());
  }
  return seqs;
}

int NumSms() {
  int device = 0, sms = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
      cudaSuccess);
  return sms;
}

// A HostBatch on the device, and the call's arguments over it; out starts
// as NaN, so a row left unwritten shows.
struct DeviceBatch {
  DeviceBuffer k, v, meta, q, q_meta, seqs, tables, visible, out, workspace;
  CudaAttentionShape shape;
  CudaPagedKvLayer kv;
  CudaAttentionBatch batch;
  size_t workspace_bytes = 0;
};

DeviceBatch UploadBatch(const HostBatch& b, int max_seq_tokens, int max_ctx) {
  DeviceBatch d;
  std::vector<int32_t> tables, visible;
  const std::vector<CudaAttentionSeq> seqs = Descriptors(b, &tables, &visible);
  d.k = Upload(b.k);
  d.v = Upload(b.v);
  d.meta = Upload(CudaMetas(b.meta));
  d.q = Upload(b.q);
  d.q_meta = Upload(CudaMetas(b.q_meta));
  d.seqs = Upload(seqs);
  d.tables = Upload(tables);
  d.visible = Upload(visible);
  d.out = Upload(std::vector<float>(b.q.size(), NAN));
  d.shape = CudaShape(b);
  d.workspace_bytes = AttentionWorkspaceBytes(d.shape, NumSms());
  d.workspace = Upload(std::vector<uint8_t>(d.workspace_bytes));
  d.kv = {d.k.as<uint16_t>(), d.v.as<uint16_t>(), d.meta.as<CudaEntryMeta>()};
  d.batch = {d.seqs.as<CudaAttentionSeq>(),
             d.tables.as<int32_t>(),
             d.visible.as<int32_t>(),
             d.q_meta.as<CudaEntryMeta>(),
             static_cast<int>(seqs.size()),
             max_seq_tokens,
             max_ctx};
  return d;
}

absl::Status RunAttention(const DeviceBatch& d, void* stream) {
  return PagedAttention(d.shape, d.kv, d.batch, d.q.as<float>(),
                        d.out.as<float>(), d.workspace.data(),
                        d.workspace_bytes, stream);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, cpu::AttentionShape shape, int bs,
                 std::vector<SeqSpec> seqs, bool split) {
    cases.push_back({std::move(name), shape, bs, std::move(seqs), split});
  };
  add("DecodeOneSequenceD64", {8, 2, 64}, 16, {Causal(37, 1)}, false);
  add("DecodeBatchGqaD128", {32, 8, 128}, 16,
      {Causal(1, 1), Causal(17, 1), Causal(100, 1), Causal(513, 1)}, true);
  add("PrefillPromptD128", {16, 4, 128}, 16, {Causal(150, 150)}, false);
  add("PrefillChunkBlock4NoGqa", {8, 8, 64}, 4, {Causal(300, 64)}, true);
  add("MixedBatch", {16, 4, 128}, 16,
      {Causal(200, 1), Causal(77, 1), Causal(250, 120), Causal(64, 3)}, false);
  add("LongDecodeD128", {32, 8, 128}, 16, {Causal(5000, 1)}, true);
  add("LongDecodeBatchD64", {16, 2, 64}, 32,
      {Causal(4100, 1), Causal(4500, 1), Causal(300, 1)}, true);
  add("LongPrefillChunk", {16, 4, 128}, 16, {Causal(4500, 40)}, true);
  add("WindowLongDecode", {32, 8, 128, 0.0f, 0.0f, 256}, 16, {Causal(4200, 1)},
      true);
  add("WindowPrefill", {8, 2, 64, 0.0f, 0.0f, 50}, 16, {Causal(400, 200)},
      true);
  add("SoftcapScaleD256", {8, 4, 256, 0.0625f, 20.0f}, 16,
      {Causal(300, 40), Causal(90, 1)}, true);
  add("SoftcapLongDecodeD256", {16, 8, 256, 0.0f, 30.0f}, 16, {Causal(4300, 1)},
      true);
  add("DecodeD256", {8, 4, 256}, 16, {Causal(70, 1), Causal(33, 2)}, false);

  // Multi-stream, aligned layout: stream 0's prefix (y < 20), streams 0..2
  // at y 20..59, then late input on stream 3 at y 59..64 that the queries
  // at y 59 must not see. A decode step of output streams 1 and 2, and a
  // prefill of all three streams' entries at y >= 40, seen by a
  // multi-stream model (all streams) and by one that isolates them.
  std::vector<KvEntryMeta> ctx = AlignedContext(20, 60, 3);
  for (int y = 59; y < 65; ++y) ctx.push_back({3, y});
  SeqSpec step;
  step.ctx = ctx;
  step.queries = {{1, 59}, {2, 59}};
  step.visible = {0, 1, 2, 3};
  add("MultiStreamDecodeStep", {16, 4, 128}, 16, {step}, false);
  SeqSpec all, isolated;
  all.ctx = isolated.ctx = AlignedContext(20, 60, 3);
  for (const KvEntryMeta& m : all.ctx) {
    if (m.y >= 40) all.queries.push_back(m);
  }
  isolated.queries = all.queries;
  all.visible = {0, 1, 2};
  isolated.visible = {0};
  add("MultiStreamPrefill", {16, 4, 128}, 16, {all, isolated}, false);
  add("MultiStreamPrefillZeroQueries", {16, 4, 128}, 16, {all, isolated},
      false);
  cases.back().zero_queries = true;
  add("MultiStreamDecodeZeroQueries", {16, 4, 128}, 16, {step}, false);
  cases.back().zero_queries = true;
  SeqSpec long_step;
  long_step.ctx = AlignedContext(1000, 2200, 3);
  long_step.queries = {{1, 2199}, {2, 2199}};
  long_step.visible = {0, 1, 2};
  add("MultiStreamLongDecode", {32, 8, 128}, 16, {long_step}, true);

  // Branches sharing a 64-entry prompt's 4 blocks: streams 1, 2 and 3 after
  // stream 0's prompt, each seeing the prompt only; two decode, one
  // prefills 30 entries.
  std::vector<SeqSpec> branches;
  for (int32_t s = 1; s <= 3; ++s) {
    SeqSpec br;
    br.ctx = Causal(64, 1).ctx;
    const int own = 20 + 17 * s;
    for (int y = 64; y < 64 + own; ++y) br.ctx.push_back({s, y});
    br.queries.assign(br.ctx.end() - (s == 3 ? 30 : 1), br.ctx.end());
    br.visible = {0};
    if (s > 1) {
      br.share_from = 0;
      br.shared_blocks = 4;
    }
    branches.push_back(br);
  }
  add("BranchesSharePrefixBlocks", {16, 4, 128}, 16, branches, false);
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Where got is furthest from want, to tell a layout bug (every row) from a
// mask bug (some queries) on a failure: the (token, head) row of the largest
// NMSE, its query's tag and sequence, and how many rows fail.
std::string WorstRow(const HostBatch& b, const std::vector<float>& got,
                     const std::vector<float>& want) {
  const int64_t dim = b.shape.head_dim;
  const int64_t rows = static_cast<int64_t>(got.size()) / dim;
  int64_t worst = 0, failing = 0;
  double worst_nmse = -1.0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> g(got.begin() + r * dim,
                               got.begin() + (r + 1) * dim);
    const std::vector<float> w(want.begin() + r * dim,
                               want.begin() + (r + 1) * dim);
    const double e = Nmse(g, w);
    failing += e > kTolerance;
    if (e > worst_nmse) {
      worst_nmse = e;
      worst = r;
    }
  }
  const int64_t token = worst / b.shape.n_head;
  int seq = 0;
  while (seq + 1 < static_cast<int>(b.first_token.size()) &&
         b.first_token[seq + 1] <= token) {
    ++seq;
  }
  const KvEntryMeta m = b.q_meta[token];
  return absl::StrCat(failing, " of ", rows, " rows over tolerance; worst ",
                      worst_nmse, " at token ", token, " head ",
                      worst % b.shape.n_head, " (stream ", m.stream, ", y ",
                      m.y, ") of sequence ", seq, ": got ", got[worst * dim],
                      ", ", got[worst * dim + 1], ", want ", want[worst * dim],
                      ", ", want[worst * dim + 1]);
}

class AttentionGpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionGpuTest, MatchesTheCpu) {
  const Case& c = GetParam();
  const HostBatch b = BuildBatch(c, 17);
  int max_tokens = 0, max_ctx = 0;
  for (size_t i = 0; i < b.tables.size(); ++i) {
    max_tokens = std::max(max_tokens, b.num_tokens[i]);
    max_ctx = std::max(max_ctx, b.num_ctx[i]);
  }
  const CudaAttentionShape shape = CudaShape(b);
  const AttentionPlan plan = PlanAttention(
      static_cast<int>(b.tables.size()), shape.n_kv_head,
      shape.n_head / shape.n_kv_head, max_tokens, max_ctx, NumSms());
  EXPECT_EQ(plan.splits > 1, c.expect_split) << "splits " << plan.splits;
  const DeviceBatch d = UploadBatch(b, max_tokens, max_ctx);
  const absl::Status st = RunAttention(d, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  const std::vector<float> got = Download<float>(d.out, b.q.size());
  const std::vector<float> want = CpuAttention(b);
  EXPECT_LE(Nmse(got, want), kTolerance)
      << (plan.decode ? "decode" : "prefill") << " tiles, " << plan.splits
      << " splits; " << WorstRow(b, got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionGpuTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// A call captured in a CUDA graph replays with new sequences in the same
// arrays: contexts that grew (the pool holds every step's entries; num_ctx
// says how many count), new queries, the split count fixed at capture.
TEST(AttentionGpuGraphTest, ReplaysWithNewContents) {
  for (int head_dim : {128, 256}) {
    Case c{"graph", {16, 4, head_dim}, 16, {Causal(1900, 1), Causal(1200, 1)}};
    HostBatch b = BuildBatch(c, 5);
    DeviceBatch d = UploadBatch(b, 1, 2048);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
    const absl::Status st = RunAttention(d, stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(st.ok()) << st;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int step : {0, 1, 2}) {
      b.num_ctx = {700 + 411 * step, 300 + 97 * step};
      for (size_t i = 0; i < 2; ++i) {
        b.q_meta[i] = {0, b.num_ctx[i] - 1};
      }
      b.q = RandomFloats(b.q.size(), 100 + step);
      std::vector<int32_t> tables, visible;
      const std::vector<CudaAttentionSeq> seqs =
          Descriptors(b, &tables, &visible);
      ASSERT_EQ(
          cudaMemcpy(d.seqs.data(), seqs.data(), seqs.size() * sizeof(seqs[0]),
                     cudaMemcpyHostToDevice),
          cudaSuccess);
      const std::vector<CudaEntryMeta> q_meta = CudaMetas(b.q_meta);
      ASSERT_EQ(
          cudaMemcpy(d.q_meta.data(), q_meta.data(),
                     q_meta.size() * sizeof(q_meta[0]), cudaMemcpyHostToDevice),
          cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d.q.data(), b.q.data(), b.q.size() * sizeof(float),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_LE(Nmse(Download<float>(d.out, b.q.size()), CpuAttention(b)),
                kTolerance)
          << "head_dim " << head_dim << " step " << step;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST(AttentionGpuArgsTest, RejectsWhatItCannotCompute) {
  Case c{"args", {8, 2, 128}, 16, {Causal(5000, 1)}, true};
  const HostBatch b = BuildBatch(c, 9);
  DeviceBatch d = UploadBatch(b, 1, 5000);
  d.shape.head_dim = 96;
  EXPECT_EQ(RunAttention(d, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  d.shape.head_dim = 128;
  d.shape.n_kv_head = 3;
  EXPECT_EQ(RunAttention(d, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  d.shape.n_kv_head = 2;
  // This call splits its context: it needs a workspace.
  d.workspace_bytes = 0;
  EXPECT_EQ(RunAttention(d, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  d.workspace_bytes = AttentionWorkspaceBytes(d.shape, NumSms());
  EXPECT_TRUE(RunAttention(d, nullptr).ok());
}

}  // namespace
}  // namespace braid::kernels::cuda
