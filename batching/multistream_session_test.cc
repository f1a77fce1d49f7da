// Sessions on a multi-stream model (docs/MULTISTREAM.md) through the engine
// and ModelExecutor: a random 4-stream Llama (model/testing/random_llama,
// roles system, user, reasoning, output, with a stream embedding table), an
// aligned session whose streams are bound to model streams in another order
// than the session's, input arriving while two output streams write in
// lockstep. Every sampled token and its log-probabilities must be those of
// the naive masked full forward pass over the entries the layout rule puts
// in the context (model/testing/masked_reference), greedy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "batching/sampler.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/session_sink.h"
#include "batching/testing/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/testing/masked_reference.h"
#include "model/testing/random_llama.h"

namespace braid::batching {
namespace {

using model::testing::MaskedEntry;
using ::testing::HasSubstr;
using testing::RecordingSessionSink;
using Kind = SessionEvent::Kind;

constexpr int kBlockSize = 4;
constexpr int kModelStreams = 4;  // system, user, reasoning, output
// Model streams of the session's streams; the session numbers them 1..3 in
// the order out, user, think, so a session that tagged entries with its own
// numbers would add the wrong stream embeddings.
constexpr int kUser = 1, kReasoning = 2, kOutput = 3;
constexpr int kOut = 1, kIn = 2, kThink = 3;  // session streams
// Log-probabilities against the double-precision reference: braid keeps K/V
// (and attention's q and weights) in fp16, so its logits are within 1e-3 of
// the row's max |logit| (model/multistream_test), and a log-probability,
// a logit minus the log-sum-exp, within twice that.
constexpr double kLogprobTol = 2e-3;  // times the row's max |logit|
constexpr int kTopLogprobs = 5;

int32_t Tok(int i) { return static_cast<int32_t>((i * 37 + 11) % 96); }

class MultiStreamSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = testing::LoadTestTokenizer().release();
    model::testing::RandomLlamaSpec spec;
    spec.matrix_type = model::GgmlType::kF32;
    spec.embedding_type = model::GgmlType::kF32;
    spec.n_ctx_train = 512;
    spec.n_streams = kModelStreams;
    spec.stream_roles = {"system", "user", "reasoning", "output"};
    spec.stream_layout = "aligned";
    spec.stream_embedding = true;
    auto file =
        model::GgufFile::FromBytes(model::testing::MakeRandomLlamaGguf(spec));
    ASSERT_TRUE(file.ok()) << file.status();
    auto loaded = model::LlamaModel::Load(*std::move(file), {2});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = loaded->release();
  }

  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_NE(model_, nullptr);
    EngineOptions o;
    o.scheduler.num_blocks = 64;
    o.scheduler.block_size = kBlockSize;
    o.scheduler.max_batch_tokens = 64;
    o.scheduler.max_num_seqs = 8;
    o.max_context_tokens = 256;
    executor_ = std::make_unique<ModelExecutor>(model_, kBlockSize,
                                                o.scheduler.num_blocks);
    engine_ = std::make_unique<Engine>(executor_.get(), tokenizer_, o,
                                       testing::FifoQueues());
  }

  static SessionStreamOptions Output(std::string name, int model_stream,
                                     int max_tokens) {
    SessionStreamOptions o;
    o.name = std::move(name);
    o.output = true;
    o.model_stream = model_stream;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.sampling.logprobs = true;
    o.sampling.top_logprobs = kTopLogprobs;
    return o;
  }

  static SessionStreamOptions Input(std::string name, int model_stream) {
    SessionStreamOptions o;
    o.name = std::move(name);
    o.model_stream = model_stream;
    return o;
  }

  static SessionOptions MultiStream(std::vector<int32_t> prefix) {
    SessionOptions o;
    o.prefix = std::move(prefix);
    o.aligned = true;
    o.model_streams = kModelStreams;
    return o;
  }

  // Greatest |braid - reference| over the sampled token's log-probability
  // and the top alternatives', over the row's max |logit| (infinite when the
  // alternatives differ).
  static double LogprobErr(const SampledToken& got,
                           const std::vector<float>& ref_row) {
    SampledToken want;
    ComputeLogprobs(ref_row, got.token_id, kTopLogprobs, &want);
    double scale = 1e-30;
    for (float x : ref_row) scale = std::max<double>(scale, std::fabs(x));
    double err = std::fabs(got.logprob - want.logprob);
    if (got.top.size() != want.top.size()) {
      return std::numeric_limits<double>::infinity();
    }
    for (size_t j = 0; j < want.top.size(); ++j) {
      if (got.top[j].token_id != want.top[j].token_id) {
        return std::numeric_limits<double>::infinity();
      }
      err = std::max<double>(
          err, std::fabs(got.top[j].logprob - want.top[j].logprob));
    }
    return err / scale;
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaModel* model_ = nullptr;
  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

// The must-show property for a served multi-stream session: input known at
// the start is prefilled as one chunk, two output streams write in lockstep
// at y = 8.., and input arriving after the third step lands at the current
// step (y = 11) and is fed one entry per step beside them. The result is the
// full pass over exactly these entries, each tagged with its model stream.
TEST_F(MultiStreamSessionTest, LateInputWhileWritingEqualsMaskedFullPass) {
  constexpr int kPrefix = 5, kInput = 3, kLate = 3, kTokens = 10;
  std::vector<int32_t> prefix, input, late;
  for (int i = 0; i < kPrefix; ++i) prefix.push_back(Tok(i));
  for (int i = 0; i < kInput; ++i) input.push_back(Tok(20 + i));
  for (int i = 0; i < kLate; ++i) late.push_back(Tok(60 + i));

  Engine* engine = engine_.get();
  uint64_t handle = 0;
  int seen = 0;
  // After the third token of `out`, append more input (engine thread: it
  // lands before the next step).
  auto sink =
      std::make_shared<RecordingSessionSink>([&](const SessionEvent& e) {
        if (e.kind == Kind::kTokens && e.stream == kOut && ++seen == 3) {
          engine->SessionAppend(handle, {"late", kIn, late, {}});
        }
      });
  SessionOptions o = MultiStream(prefix);
  o.streams = {Output("out", kOutput, kTokens), Input("user", kUser),
               Output("think", kReasoning, kTokens)};
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  handle = *h;
  engine_->SessionAppend(*h, {"in1", kIn, input, {kOut, kThink}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 2));
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  const EngineStats stats = engine_->Stats();
  EXPECT_EQ(stats.sessions, 0);
  EXPECT_EQ(stats.kv_blocks_free, stats.kv_blocks_total);

  // Where the aligned layout puts everything: the input after the prefix,
  // both outputs from the next position on, the late input at the step the
  // outputs were about to write.
  const int y_out = kPrefix + kInput;
  const int y_late = y_out + 3;
  std::vector<MaskedEntry> entries;
  for (int y = 0; y < kPrefix; ++y) entries.push_back({prefix[y], 0, y});
  for (int i = 0; i < kInput; ++i) {
    entries.push_back({input[i], kUser, kPrefix + i});
  }
  // Each sampled token and the entry whose logits gave it: its stream's
  // entry at y - 1, or for the first one of each stream the input's last.
  std::vector<std::pair<size_t, SampledToken>> sampled;
  std::vector<size_t> last = {0, entries.size() - 1, entries.size() - 1,
                              entries.size() - 1};
  int acks = 0;
  for (const SessionEvent& e : sink->events()) {
    if (e.kind == Kind::kAck) {
      ++acks;
      const bool first = e.input_id == "in1";
      EXPECT_EQ(e.first_position, first ? kPrefix : y_late) << e.input_id;
      EXPECT_EQ(e.end_position, first ? kPrefix + kInput : y_late + kLate)
          << e.input_id;
    }
    if (e.kind != Kind::kTokens) continue;
    ASSERT_EQ(e.tokens.size(), 1u);
    const int stream = e.stream == kOut ? kOutput : kReasoning;
    const int y = entries[last[stream]].stream == stream
                      ? entries[last[stream]].y + 1
                      : y_out;
    EXPECT_EQ(e.first_position, y) << "stream " << e.stream;
    sampled.push_back({last[stream], e.tokens[0]});
    last[stream] = entries.size();
    entries.push_back({e.tokens[0].token_id, stream, y});
  }
  EXPECT_EQ(acks, 2);
  ASSERT_EQ(sampled.size(), 2u * kTokens);
  for (int i = 0; i < kLate; ++i) {
    entries.push_back({late[i], kUser, y_late + i});
  }

  const std::vector<std::vector<int32_t>> all_see(kModelStreams, {0, 1, 2, 3});
  const auto check = [&](const std::vector<MaskedEntry>& es) {
    const auto ref = model::testing::MaskedFullForward(*model_, es, all_see);
    double worst = 0;
    int argmax_mismatches = 0;
    for (const auto& [source, token] : sampled) {
      const std::vector<float>& row = ref[source];
      const int32_t argmax = static_cast<int32_t>(
          std::max_element(row.begin(), row.end()) - row.begin());
      argmax_mismatches += argmax != token.token_id;
      worst = std::max(worst, LogprobErr(token, row));
    }
    return std::make_pair(argmax_mismatches, worst);
  };
  const auto [mismatches, worst] = check(entries);
  std::printf(
      "%zu entries, max log-probability error %.2e of the row's max "
      "|logit|\n",
      entries.size(), worst);
  EXPECT_EQ(mismatches, 0);
  EXPECT_LE(worst, kLogprobTol);

  // The comparison is sharp: entries tagged with the session's stream
  // numbers (the wrong stream embeddings), or the late input left out, give
  // other log-probabilities.
  std::vector<MaskedEntry> session_tags = entries;
  for (MaskedEntry& e : session_tags) {
    if (e.stream == kOutput)
      e.stream = kOut;
    else if (e.stream == kUser)
      e.stream = kIn;
    else if (e.stream == kReasoning)
      e.stream = kThink;
  }
  EXPECT_GT(check(session_tags).second, 10 * kLogprobTol);
  const std::vector<MaskedEntry> no_late(entries.begin(),
                                         entries.end() - kLate);
  EXPECT_GT(check(no_late).second, 10 * kLogprobTol);
}

TEST_F(MultiStreamSessionTest, OpenChecksTheModelStreamBinding) {
  struct Case {
    const char* name;
    void (*edit)(SessionOptions&);
    const char* error;
  };
  const Case cases[] = {
      {"linear", [](SessionOptions& o) { o.aligned = false; },
       "aligned layout"},
      {"out of range",
       [](SessionOptions& o) { o.streams[1].model_stream = kModelStreams; },
       "outside [0, 4)"},
      {"two to one",
       [](SessionOptions& o) { o.streams[1].model_stream = kOutput; },
       "both bound to model stream 3"},
      {"branch",
       [](SessionOptions& o) {
         o.streams[0].visibility = StreamVisibility::kBranch;
       },
       "branches need a single-stream model"},
  };
  for (const Case& c : cases) {
    SessionOptions o = MultiStream({Tok(0), Tok(1)});
    o.streams = {Output("out", kOutput, 4), Input("user", kUser)};
    c.edit(o);
    auto h = engine_->OpenSession(o, std::make_shared<RecordingSessionSink>());
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(h.status().message(), HasSubstr(c.error)) << c.name;
  }
  EXPECT_EQ(engine_->Stats().sessions, 0);
}

}  // namespace
}  // namespace braid::batching
