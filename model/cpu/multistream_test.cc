// docs/MULTISTREAM.md's "What proves it" at the model level: for every stream
// layout, braid's incremental paged decoding (a prefix chunk, then one entry
// per stream per step, in lockstep) gives the logits of one full forward pass
// over all entries with the explicit visibility mask, computed by a naive
// float reference (model/testing/masked_reference: plain loops in double over
// dequantized weights). Also the
// multi-stream metadata (braid.streams.*, stream_embd.weight) end to end.
//
// Tolerance: braid keeps K/V in fp16 and, like llama.cpp, rounds q and the
// softmax weights to fp16 inside attention (F16 weights also round the
// activations to fp16), so it is not bit-equal to a float reference. Each
// check bounds max |braid - reference| over an entry's logits row by kRelTol
// times the row's max |reference| (a tight 1e-3 relative check with F32 / F16
// weights; the observed error is a few 1e-4 at most). A wrong mask (one entry
// visible that should not be, or the reverse) or a missing stream embedding
// moves logits by 1e-2 .. 1e0 relative, far outside it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/batch.h"
#include "model/cpu/llama.h"
#include "model/cpu/paged_kv.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/testing/masked_reference.h"
#include "model/testing/random_llama.h"

namespace braid::model {
namespace {

using ::testing::HasSubstr;
using testing::MaxRelErr;
using testing::RelErr;

constexpr double kRelTol = 1e-3;
constexpr int kNumStreams = 4;  // system, user, reasoning, output.
constexpr int kBlockSize = 4;

testing::RandomLlamaSpec Spec(GgmlType type, const std::string& layout) {
  testing::RandomLlamaSpec spec;
  spec.matrix_type = type;
  spec.embedding_type = type;
  spec.n_ctx_train = 512;
  spec.n_streams = kNumStreams;
  spec.stream_roles = {"system", "user", "reasoning", "output"};
  spec.stream_layout = layout;
  spec.silence_token_id = 3;
  spec.stream_embedding = true;
  spec.stream_embd_type = type;
  return spec;
}

std::unique_ptr<LlamaModel> Load(const testing::RandomLlamaSpec& spec) {
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto model = LlamaModel::Load(*std::move(file), LoadOptions{2});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// ---------------------------------------------------------------------------
// Layouts.

constexpr int32_t kSampled = -1;  // The token is the argmax of the stream's
                                  // previous entry's logits (greedy decoding).

using Entry = testing::MaskedEntry;  // token may be kSampled.

struct Layout {
  std::string name;
  std::vector<Entry> entries;  // In the order they enter the KV context.
  std::vector<int> chunks;     // Entries are fed in consecutive chunks.
  std::vector<std::vector<int32_t>> sees;  // sees[s], s included.
};

int32_t Tok(int i) { return static_cast<int32_t>((i * 37 + 11) % 96); }

std::vector<std::vector<int32_t>> AllSee() {
  return std::vector<std::vector<int32_t>>(kNumStreams, {0, 1, 2, 3});
}

// (a) One stream: the causal mask.
Layout OneStream() {
  Layout l{"one_stream", {}, {}, {{0}, {1}, {2}, {3}}};
  const int prefix = 7, steps = 8;
  for (int y = 0; y < prefix; ++y) l.entries.push_back({Tok(y), 0, y});
  l.chunks.push_back(prefix);
  for (int y = prefix; y < prefix + steps; ++y) {
    l.entries.push_back({kSampled, 0, y});
    l.chunks.push_back(1);
  }
  return l;
}

// (b) Three independent branches (streams 1..3) over a shared prefix
// (stream 0): sees(b) = {0, b}.
Layout Branches() {
  Layout l{"branches", {}, {}, {{0}, {0, 1}, {0, 2}, {0, 3}}};
  const int prefix = 6, steps = 6;
  for (int y = 0; y < prefix; ++y) l.entries.push_back({Tok(y), 0, y});
  l.chunks.push_back(prefix);
  for (int step = 0; step < steps; ++step) {
    for (int b = 1; b <= 3; ++b) {
      // Different first tokens, so the branches differ.
      l.entries.push_back(
          {step == 0 ? Tok(50 + b) : kSampled, b, prefix + step});
    }
    l.chunks.push_back(3);
  }
  return l;
}

// (c) Aligned multi-stream, full cross-visibility: a system prefix on stream
// 0, then streams 1..3 y-aligned, one entry each per step. Stream 1 is input
// (teacher-forced), 2 and 3 are sampled.
Layout Aligned() {
  Layout l{"aligned", {}, {}, AllSee()};
  const int prefix = 5, steps = 7;
  for (int y = 0; y < prefix; ++y) l.entries.push_back({Tok(y), 0, y});
  l.chunks.push_back(prefix);
  for (int step = 0; step < steps; ++step) {
    const int y = prefix + step;
    l.entries.push_back({Tok(20 + step), 1, y});
    l.entries.push_back({step == 0 ? Tok(40) : kSampled, 2, y});
    l.entries.push_back({step == 0 ? Tok(41) : kSampled, 3, y});
    l.chunks.push_back(3);
  }
  return l;
}

// (d) Rows: every stream at every position from y = 0, gaps filled with the
// silence token; the first rows (all four streams) are one prefill chunk.
Layout Rows(int32_t silence) {
  Layout l{"rows", {}, {}, AllSee()};
  const int prefix_rows = 3, rows = 10;
  for (int y = 0; y < rows; ++y) {
    l.entries.push_back({y < 4 ? Tok(y) : silence, 0, y});  // system
    l.entries.push_back({y >= 2 && y < 6 ? Tok(30 + y) : silence, 1, y});
    l.entries.push_back({y < 4 ? silence : kSampled, 2, y});  // reasoning
    l.entries.push_back({y < 6 ? silence : kSampled, 3, y});  // output
    if (y >= prefix_rows) l.chunks.push_back(4);
  }
  l.chunks.insert(l.chunks.begin(), 4 * prefix_rows);
  return l;
}

// (e) Late input: outputs (streams 2, 3) write from y = prefix; after three
// steps, input on stream 1 arrives and is fed one entry per step at
// y = the current step, alongside the outputs.
Layout LateInput() {
  Layout l{"late_input", {}, {}, AllSee()};
  const int prefix = 5, steps = 8, arrives = 3, input_len = 3;
  for (int y = 0; y < prefix; ++y) l.entries.push_back({Tok(y), 0, y});
  l.chunks.push_back(prefix);
  for (int step = 0; step < steps; ++step) {
    const int y = prefix + step;
    int n = 2;
    if (step >= arrives && step < arrives + input_len) {
      l.entries.push_back({Tok(60 + step), 1, y});
      ++n;
    }
    l.entries.push_back({step == 0 ? Tok(40) : kSampled, 2, y});
    l.entries.push_back({step == 0 ? Tok(41) : kSampled, 3, y});
    l.chunks.push_back(n);
  }
  return l;
}

// Input known up front on stream 1 at y = prefix .. prefix + n - 1, next to
// outputs 2 and 3 written in lockstep; input sees only {0, 1}, outputs see
// everything. chunked: the input is one chunk with the prefix (before any
// output); else one input entry per step with the outputs.
// input_sees_outputs: sees(1) = everything (for the limit test below).
Layout KnownInput(bool chunked, bool input_sees_outputs = false) {
  Layout l{chunked ? "input_chunked" : "input_per_step",
           {},
           {},
           {{0}, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}}};
  if (input_sees_outputs) l.sees[1] = {0, 1, 2, 3};
  const int prefix = 4, steps = 6, input_len = 5;
  for (int y = 0; y < prefix; ++y) l.entries.push_back({Tok(y), 0, y});
  if (chunked) {
    for (int i = 0; i < input_len; ++i) {
      l.entries.push_back({Tok(70 + i), 1, prefix + i});
    }
  }
  l.chunks.push_back(static_cast<int>(l.entries.size()));
  for (int step = 0; step < steps; ++step) {
    const int y = prefix + step;
    int n = 2;
    if (!chunked && step < input_len) {
      l.entries.push_back({Tok(70 + step), 1, y});
      ++n;
    }
    l.entries.push_back({step == 0 ? Tok(40) : kSampled, 2, y});
    l.entries.push_back({step == 0 ? Tok(41) : kSampled, 3, y});
    l.chunks.push_back(n);
  }
  return l;
}

// ---------------------------------------------------------------------------
// braid: incremental paged decoding. Each chunk is one Forward; consecutive
// entries whose streams have the same sees() form one BatchSequence (so the
// aligned layouts run every stream of a step as one sequence and branches as
// one sequence each), all over one shared block table (scrambled blocks).
// Fills sampled tokens in `layout` and returns every entry's logits.
absl::StatusOr<std::vector<std::vector<float>>> RunBraid(LlamaModel& model,
                                                         Layout& layout) {
  const int n_vocab = model.config().n_vocab;
  const int n = static_cast<int>(layout.entries.size());
  const int num_blocks = (n + kBlockSize - 1) / kBlockSize + 1;
  PagedKvPool pool = model.NewPagedKvPool(kBlockSize, num_blocks);
  std::vector<int32_t> table(num_blocks);
  for (int b = 0; b < num_blocks; ++b) table[b] = num_blocks - 1 - b;
  std::vector<std::vector<float>> out(n);
  std::vector<int> last_of_stream(kNumStreams, -1);
  int next = 0;
  for (int chunk : layout.chunks) {
    Batch batch;
    for (int i = next; i < next + chunk; ++i) {
      Entry& e = layout.entries[i];
      if (e.token == kSampled) {
        const int prev = last_of_stream[e.stream];
        if (prev < 0 || prev >= next) {
          return absl::InternalError(absl::StrCat(layout.name, ": entry ", i,
                                                  " samples from nothing"));
        }
        e.token = static_cast<int32_t>(
            std::max_element(out[prev].begin(), out[prev].end()) -
            out[prev].begin());
      }
      batch.tokens.push_back(e.token);
      batch.meta.push_back(EntryMeta{e.stream, e.y});
      const bool same = i > next && layout.sees[layout.entries[i - 1].stream] ==
                                        layout.sees[e.stream];
      if (!same) {
        BatchSequence seq;
        seq.first_token = i - next;
        seq.num_cached = i;
        seq.block_table = table;
        seq.visible_streams = layout.sees[e.stream];
        seq.logits = BatchSequence::Logits::kAll;
        batch.sequences.push_back(std::move(seq));
      }
      ++batch.sequences.back().num_tokens;
    }
    std::vector<float> logits;
    if (absl::Status s = model.Forward(batch, pool, &logits); !s.ok()) return s;
    if (logits.size() != static_cast<size_t>(chunk) * n_vocab) {
      return absl::InternalError("wrong logits size");
    }
    for (int i = 0; i < chunk; ++i) {
      out[next + i].assign(logits.begin() + int64_t{i} * n_vocab,
                           logits.begin() + int64_t{i + 1} * n_vocab);
      last_of_stream[layout.entries[next + i].stream] = next + i;
    }
    next += chunk;
  }
  if (next != n) return absl::InternalError("chunks do not cover the entries");
  return out;
}

// The naive reference (model/testing/masked_reference): one forward pass over
// all entries at once, in double, with the explicit mask.
std::vector<std::vector<float>> RunReference(const LlamaModel& model,
                                             const Layout& l) {
  return testing::MaskedFullForward(model, l.entries, l.sees);
}

class MultiStreamTest : public ::testing::TestWithParam<GgmlType> {};

// The must-show property, for every layout.
TEST_P(MultiStreamTest, IncrementalDecodingEqualsFullForwardWithMask) {
  for (const char* file_layout : {"aligned", "rows"}) {
    const testing::RandomLlamaSpec spec = Spec(GetParam(), file_layout);
    auto model = Load(spec);
    ASSERT_NE(model, nullptr);
    std::vector<Layout> layouts = {OneStream(),      Branches(),
                                   Aligned(),        LateInput(),
                                   KnownInput(true), KnownInput(false)};
    if (std::string(file_layout) == "rows") {
      layouts = {Rows(model->config().silence_token_id)};
    }
    for (Layout& layout : layouts) {
      SCOPED_TRACE(layout.name);
      auto got = RunBraid(*model, layout);
      ASSERT_TRUE(got.ok()) << got.status();
      const auto want = RunReference(*model, layout);
      double worst = 0;
      for (size_t t = 0; t < want.size(); ++t) {
        const double err = RelErr((*got)[t], want[t]);
        worst = std::max(worst, err);
        EXPECT_LE(err, kRelTol)
            << "entry " << t << " (stream " << layout.entries[t].stream
            << ", y " << layout.entries[t].y << ")";
      }
      std::printf("%s %s: %zu entries, max relative error %.2e\n",
                  GgmlTypeName(static_cast<uint32_t>(GetParam())).c_str(),
                  layout.name.c_str(), want.size(), worst);
    }
  }
}

// The checks are sharp: the same comparison with a wrong mask (branches that
// see each other), or without the stream embedding, fails by far.
TEST_P(MultiStreamTest, ReferenceDetectsWrongMaskAndMissingStreamEmbedding) {
  auto model = Load(Spec(GetParam(), "aligned"));
  ASSERT_NE(model, nullptr);
  Layout branches = Branches();
  auto got = RunBraid(*model, branches);
  ASSERT_TRUE(got.ok()) << got.status();
  Layout wrong = branches;
  wrong.sees = AllSee();
  EXPECT_GT(MaxRelErr(*got, RunReference(*model, wrong)), 30 * kRelTol);

  testing::RandomLlamaSpec plain_spec = Spec(GetParam(), "aligned");
  plain_spec.stream_embedding = false;
  auto plain = Load(plain_spec);
  ASSERT_NE(plain, nullptr);
  Layout aligned = Aligned();
  auto with_embd = RunBraid(*model, aligned);  // Fills the sampled tokens.
  ASSERT_TRUE(with_embd.ok());
  EXPECT_GT(MaxRelErr(*with_embd, RunReference(*plain, aligned)), 30 * kRelTol);
  EXPECT_LE(MaxRelErr(*with_embd, RunReference(*model, aligned)), kRelTol);
}

// MULTISTREAM.md: input known up front may be prefilled in chunks and give the
// result of feeding it one token per step. True when the input stream does
// not see the outputs (KnownInput); the outputs' tokens and logits agree.
TEST_P(MultiStreamTest, ChunkedInputPrefillEqualsOneTokenPerStep) {
  auto model = Load(Spec(GetParam(), "aligned"));
  ASSERT_NE(model, nullptr);
  Layout chunked = KnownInput(true), per_step = KnownInput(false);
  auto a = RunBraid(*model, chunked);
  auto b = RunBraid(*model, per_step);
  ASSERT_TRUE(a.ok() && b.ok());
  // Match entries by (stream, y).
  ASSERT_EQ(chunked.entries.size(), per_step.entries.size());
  int compared = 0;
  for (size_t i = 0; i < chunked.entries.size(); ++i) {
    for (size_t j = 0; j < per_step.entries.size(); ++j) {
      const Entry& x = chunked.entries[i];
      const Entry& y = per_step.entries[j];
      if (x.stream != y.stream || x.y != y.y) continue;
      EXPECT_EQ(x.token, y.token) << "stream " << x.stream << " y " << x.y;
      EXPECT_LE(RelErr((*a)[i], (*b)[j]), kRelTol)
          << "stream " << x.stream << " y " << x.y;
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(chunked.entries.size()));
}

// The limit of that claim: when the input stream sees the outputs (the
// paper's full cross-visibility), an input entry at y must see the outputs
// at y' < y, which do not exist yet when it is prefilled ahead; chunked
// prefill then differs from the full forward pass (per-step feeding does not).
TEST_P(MultiStreamTest, ChunkedInputThatSeesOutputsDiffersFromFullForward) {
  auto model = Load(Spec(GetParam(), "aligned"));
  ASSERT_NE(model, nullptr);
  Layout per_step = KnownInput(false, true), chunked = KnownInput(true, true);
  auto a = RunBraid(*model, per_step);
  auto b = RunBraid(*model, chunked);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LE(MaxRelErr(*a, RunReference(*model, per_step)), kRelTol);
  EXPECT_GT(MaxRelErr(*b, RunReference(*model, chunked)), 30 * kRelTol);
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, MultiStreamTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16),
                         [](const auto& info) {
                           return GgmlTypeName(
                               static_cast<uint32_t>(info.param));
                         });

// ---------------------------------------------------------------------------
// Metadata.

TEST(MultiStreamConfigTest, ReadsStreamKeys) {
  auto model = Load(Spec(GgmlType::kF32, "rows"));
  ASSERT_NE(model, nullptr);
  const LlamaConfig& c = model->config();
  EXPECT_EQ(c.n_streams, kNumStreams);
  EXPECT_THAT(c.stream_roles,
              ::testing::ElementsAre("system", "user", "reasoning", "output"));
  EXPECT_EQ(c.stream_layout, LlamaConfig::StreamLayout::kRows);
  EXPECT_EQ(c.silence_token_id, 3);
}

TEST(MultiStreamConfigTest, AbsentKeysMeanSingleStream) {
  testing::RandomLlamaSpec spec;
  auto model = Load(spec);
  ASSERT_NE(model, nullptr);
  const LlamaConfig& c = model->config();
  EXPECT_EQ(c.n_streams, 1);
  EXPECT_TRUE(c.stream_roles.empty());
  EXPECT_EQ(c.stream_layout, LlamaConfig::StreamLayout::kAligned);
  EXPECT_EQ(c.silence_token_id, -1);
  // Without stream_embd any stream id is accepted (branches use them).
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 2);
  Batch b;
  b.tokens = {5};
  b.meta = {EntryMeta{7, 0}};
  BatchSequence seq;
  seq.num_tokens = 1;
  seq.block_table = {0};
  b.sequences.push_back(seq);
  std::vector<float> logits;
  EXPECT_TRUE(model->Forward(b, pool, &logits).ok());
}

absl::Status LoadStatus(const testing::RandomLlamaSpec& spec) {
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  if (!file.ok()) return file.status();
  return LlamaModel::Load(*std::move(file), LoadOptions{1}).status();
}

TEST(MultiStreamConfigTest, RejectsBadKeys) {
  struct Case {
    const char* name;
    void (*edit)(testing::RandomLlamaSpec&);
    const char* error;
  };
  const Case cases[] = {
      {"roles count",
       [](testing::RandomLlamaSpec& s) {
         s.stream_roles = {"a", "b"};
       },
       "braid.streams.roles has 2 entries"},
      {"layout", [](testing::RandomLlamaSpec& s) { s.stream_layout = "diag"; },
       "braid.streams.layout"},
      {"silence", [](testing::RandomLlamaSpec& s) { s.silence_token_id = 96; },
       "braid.streams.silence_token_id"},
      {"rows without silence",
       [](testing::RandomLlamaSpec& s) {
         s.stream_layout = "rows";
         s.silence_token_id = -1;
       },
       "rows layout needs"},
      {"count",
       [](testing::RandomLlamaSpec& s) {
         s.n_streams = 5000;
         s.stream_roles.clear();
         s.stream_embedding = false;
       },
       "braid.streams.count"},
  };
  for (const Case& c : cases) {
    testing::RandomLlamaSpec spec = Spec(GgmlType::kF32, "aligned");
    c.edit(spec);
    absl::Status s = LoadStatus(spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
  }
}

TEST(MultiStreamConfigTest, KeysWithoutCountAreRejected) {
  testing::RandomLlamaSpec spec;
  spec.stream_layout = "aligned";  // No braid.streams.count.
  absl::Status s = LoadStatus(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("without braid.streams.count"));
  // A stream_embd without any key is a table for the one stream.
  spec.stream_layout.clear();
  spec.stream_embedding = true;
  EXPECT_TRUE(LoadStatus(spec).ok());
}

TEST(MultiStreamConfigTest, RejectsStreamEmbdOfWrongShape) {
  testing::RandomLlamaSpec spec = Spec(GgmlType::kF32, "aligned");
  spec.stream_embd_rows = kNumStreams - 1;
  absl::Status s = LoadStatus(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("stream_embd.weight has shape"));
}

TEST(MultiStreamConfigTest, QuantizedStreamEmbdAndBadStreamIds) {
  testing::RandomLlamaSpec spec = Spec(GgmlType::kQ4_1, "aligned");
  spec.embedding_type = GgmlType::kQ8_0;
  spec.stream_embd_type = GgmlType::kQ8_0;
  auto model = Load(spec);
  ASSERT_NE(model, nullptr);
  PagedKvPool pool = model->NewPagedKvPool(kBlockSize, 2);
  for (int32_t stream : {-1, kNumStreams, 0, kNumStreams - 1}) {
    Batch b;
    b.tokens = {5};
    b.meta = {EntryMeta{stream, 0}};
    BatchSequence seq;
    seq.num_tokens = 1;
    seq.block_table = {0};
    b.sequences.push_back(seq);
    std::vector<float> logits = {1.0f};
    absl::Status s = model->Forward(b, pool, &logits);
    if (stream < 0 || stream >= kNumStreams) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << stream;
      EXPECT_THAT(s.message(), HasSubstr("stream id")) << stream;
      EXPECT_EQ(logits, std::vector<float>{1.0f});  // Unchanged.
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

}  // namespace
}  // namespace braid::model
