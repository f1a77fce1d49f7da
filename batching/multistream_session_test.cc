// Sessions on a multi-stream model (docs/MULTISTREAM.md) through the engine
// and ModelExecutor: a random 4-stream Llama (model/testing/random_llama,
// roles system, user, reasoning, output, with a stream embedding table), a
// session whose streams are bound to model streams in another order than
// the session's, input arriving while two output streams write in lockstep;
// in the aligned layout, in the rows layout (a second model, silence-filled)
// and with both output streams as branches. Every sampled token and its
// log-probabilities must be those of the naive masked full forward pass over
// the entries the layout rule puts in the context
// (model/testing/masked_reference), greedy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
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
#include "model/cpu/llama.h"
#include "model/gguf.h"
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
constexpr int32_t kSilence = 7;  // the rows model's silence token
constexpr int kPrefix = 5, kInput = 3, kLate = 3, kTokens = 10;

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
    spec.stream_layout = "rows";
    spec.silence_token_id = kSilence;
    file =
        model::GgufFile::FromBytes(model::testing::MakeRandomLlamaGguf(spec));
    ASSERT_TRUE(file.ok()) << file.status();
    loaded = model::LlamaModel::Load(*std::move(file), {2});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    rows_model_ = loaded->release();
  }

  // The engine over `model` (the aligned one unless given).
  void UseModel(model::LlamaModel* model) {
    engine_.reset();
    EngineOptions o = Options();
    executor_ = std::make_unique<ModelExecutor>(model, kBlockSize,
                                                o.scheduler.num_blocks);
    engine_ = std::make_unique<Engine>(executor_.get(), tokenizer_, o,
                                       testing::FifoQueues());
  }

  static EngineOptions Options() {
    EngineOptions o;
    o.scheduler.num_blocks = 64;
    o.scheduler.block_size = kBlockSize;
    o.scheduler.max_batch_tokens = 64;
    o.scheduler.max_num_seqs = 8;
    o.max_context_tokens = 256;
    return o;
  }

  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_NE(model_, nullptr);
    ASSERT_NE(rows_model_, nullptr);
    UseModel(model_);
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
  // and the top alternatives', over the row's max |logit| (infinite when
  // their number differs). An alternative is compared with the reference's
  // log-probability of the same token, and one that is not among the
  // reference's top ones counts by how far it falls below them: near-ties
  // may swap places within the tolerance, another token may not.
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
    const double log_z = ref_row[got.token_id] - double{want.logprob};
    for (const TokenChoice& alt : got.top) {
      const double ref = ref_row[alt.token_id] - log_z;
      err = std::max(err, std::fabs(alt.logprob - ref));
      if (!want.top.empty()) {
        err = std::max(err, double{want.top.back().logprob} - ref);
      }
    }
    return err / scale;
  }

  // The session streams out (model stream kOutput), user (kUser) and think
  // (kReasoning), the outputs with `visibility`.
  static SessionOptions ThreeStreams(StreamVisibility visibility) {
    SessionOptions o = MultiStream(Prefix());
    o.streams = {Output("out", kOutput, kTokens), Input("user", kUser),
                 Output("think", kReasoning, kTokens)};
    o.streams[0].visibility = visibility;
    o.streams[2].visibility = visibility;
    return o;
  }

  static std::vector<int32_t> Prefix() { return Tokens(0, kPrefix); }
  static std::vector<int32_t> FirstInput() { return Tokens(20, kInput); }
  static std::vector<int32_t> LateInput() { return Tokens(60, kLate); }
  static std::vector<int32_t> Tokens(int from, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(Tok(from + i));
    return t;
  }

  // Runs `o`: input "in1" starts both outputs, input "late" is appended
  // after the third token of out (on the engine thread: it lands before the
  // next step); after both turns end, `after` runs. Then the session closes
  // and every block must be free. Returns the events.
  std::vector<SessionEvent> RunLateInput(
      const SessionOptions& o,
      const std::function<void(uint64_t, RecordingSessionSink&)>& after =
          nullptr) {
    return RunInputs(o, {{"late", 3, LateInput()}}, after);
  }

  // Input appended while the outputs write: `tokens` as input `id` after
  // out's `after`-th token.
  struct Late {
    std::string id;
    int after = 0;
    std::vector<int32_t> tokens;
  };

  // RunLateInput with any late inputs.
  std::vector<SessionEvent> RunInputs(
      const SessionOptions& o, const std::vector<Late>& lates,
      const std::function<void(uint64_t, RecordingSessionSink&)>& after =
          nullptr) {
    Engine* engine = engine_.get();
    uint64_t handle = 0;
    int seen = 0;
    auto sink =
        std::make_shared<RecordingSessionSink>([&](const SessionEvent& e) {
          if (e.kind != Kind::kTokens || e.stream != kOut) return;
          ++seen;
          for (const Late& l : lates) {
            if (l.after == seen) {
              engine->SessionAppend(handle, {l.id, kIn, l.tokens, {}});
            }
          }
        });
    auto h = engine_->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return {};
    handle = *h;
    engine_->SessionAppend(*h, {"in1", kIn, FirstInput(), {kOut, kThink}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 2));
    if (after) after(*h, *sink);
    engine_->CloseSession(*h);
    EXPECT_TRUE(sink->WaitFor(Kind::kClosed, 1));
    const EngineStats stats = engine_->Stats();
    EXPECT_EQ(stats.sessions, 0);
    EXPECT_EQ(stats.kv_blocks_free, stats.kv_blocks_total);
    return sink->events();
  }

  static int ModelStreamOf(int session_stream) {
    return session_stream == kOut  ? kOutput
           : session_stream == kIn ? kUser
                                   : kReasoning;
  }

  // The context a run's events describe, by the layout rule: the prefix on
  // model stream 0, "in1" and "late" at their acknowledged positions on
  // kUser, each token at its position on its model stream and, for the rows
  // layout (silence >= 0), silence at every other (model stream, y) from
  // the prefix up to the last token. A token at (m, y) comes from the
  // logits of (m, y - 1), or (an aligned turn's first token) of the last
  // entry of "in1".
  struct Reference {
    std::vector<MaskedEntry> entries;
    std::vector<std::pair<size_t, SampledToken>> sampled;  // source, token
  };
  static Reference BuildReference(const std::vector<SessionEvent>& events,
                                  int32_t silence) {
    return BuildReference(events, silence,
                          {{"in1", FirstInput()}, {"late", LateInput()}});
  }
  // The same for the inputs named in `inputs` (id -> tokens; "in1" starts
  // the outputs).
  static Reference BuildReference(
      const std::vector<SessionEvent>& events, int32_t silence,
      const std::map<std::string, std::vector<int32_t>>& inputs) {
    Reference r;
    std::map<std::pair<int, int>, size_t> at;  // (model stream, y) -> entry
    const auto add = [&](int32_t token, int m, int y) {
      EXPECT_EQ(at.count({m, y}), 0u)
          << "two entries at (" << m << ", " << y << ")";
      at[{m, y}] = r.entries.size();
      r.entries.push_back({token, m, y});
    };
    const std::vector<int32_t> prefix = Prefix();
    for (int y = 0; y < kPrefix; ++y) add(prefix[y], 0, y);
    size_t in1_last = 0;
    int y_end = kPrefix;
    std::vector<std::pair<int, int>> token_at;  // (m, y) of each sampled
    for (const SessionEvent& e : events) {
      if (e.kind == Kind::kAck && inputs.count(e.input_id) > 0) {
        const std::vector<int32_t>& tokens = inputs.at(e.input_id);
        EXPECT_EQ(e.end_position - e.first_position,
                  static_cast<int64_t>(tokens.size()));
        for (size_t i = 0; i < tokens.size(); ++i) {
          add(tokens[i], kUser, static_cast<int>(e.first_position + i));
        }
        if (e.input_id == "in1") in1_last = r.entries.size() - 1;
        y_end = std::max<int>(y_end, static_cast<int>(e.end_position));
      }
      if (e.kind != Kind::kTokens) continue;
      EXPECT_EQ(e.tokens.size(), 1u);
      const int m = ModelStreamOf(e.stream);
      const int y = static_cast<int>(e.first_position);
      add(e.tokens[0].token_id, m, y);
      token_at.push_back({m, y});
      r.sampled.push_back({0, e.tokens[0]});
      y_end = std::max(y_end, y + 1);
    }
    if (silence >= 0) {
      for (int y = kPrefix; y < y_end; ++y) {
        for (int m = 0; m < kModelStreams; ++m) {
          if (at.count({m, y}) == 0) add(silence, m, y);
        }
      }
    }
    for (size_t i = 0; i < token_at.size(); ++i) {
      auto it = at.find({token_at[i].first, token_at[i].second - 1});
      r.sampled[i].first = it != at.end() ? it->second : in1_last;
    }
    return r;
  }

  // r's sampled tokens are the masked full pass's argmax and their
  // log-probabilities within kLogprobTol of it (printed as `what`).
  static void ExpectMatchesFullPass(
      const char* what, const model::LlamaModel& model, const Reference& r,
      const std::vector<std::vector<int32_t>>& sees) {
    const auto [mismatches, worst] = Check(model, r, r.entries, sees);
    std::printf(
        "%s: %zu entries, max log-probability error %.2e of the row's max "
        "|logit|\n",
        what, r.entries.size(), worst);
    EXPECT_EQ(mismatches, 0);
    EXPECT_LE(worst, kLogprobTol);
  }

  // The tokens that differ from the reference's argmax, and the worst
  // log-probability error (LogprobErr).
  static std::pair<int, double> Check(
      const model::LlamaModel& model, const Reference& r,
      const std::vector<MaskedEntry>& entries,
      const std::vector<std::vector<int32_t>>& sees) {
    const auto ref = model::testing::MaskedFullForward(model, entries, sees);
    double worst = 0;
    int argmax_mismatches = 0;
    for (const auto& [source, token] : r.sampled) {
      const std::vector<float>& row = ref[source];
      const int32_t argmax = static_cast<int32_t>(
          std::max_element(row.begin(), row.end()) - row.begin());
      argmax_mismatches += argmax != token.token_id;
      worst = std::max(worst, LogprobErr(token, row));
    }
    return {argmax_mismatches, worst};
  }

  // `r`'s entries with the input "late" (at kUser from `y_late`) replaced
  // by `token` (silence, or another token in the aligned layout).
  static std::vector<MaskedEntry> ReplaceLate(const Reference& r, int y_late,
                                              int32_t token) {
    std::vector<MaskedEntry> es = r.entries;
    for (MaskedEntry& e : es) {
      if (e.stream == kUser && e.y >= y_late && e.y < y_late + kLate) {
        e.token = token;
      }
    }
    return es;
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaModel* model_ = nullptr;       // aligned
  static inline model::LlamaModel* rows_model_ = nullptr;  // rows, kSilence
  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

// Where the aligned layout puts everything: the input after the prefix (y =
// 5..7), both outputs from the next position on (8..17), the late input at
// the step the outputs were about to write (11..13).
constexpr int kYOut = kPrefix + kInput, kYLate = kYOut + 3;

// Acks and token positions of a run of RunLateInput.
void ExpectLateInputPositions(const std::vector<SessionEvent>& events) {
  int acks = 0, tokens = 0;
  std::map<int, int> next_y = {{kOut, kYOut}, {kThink, kYOut}};
  for (const SessionEvent& e : events) {
    if (e.kind == Kind::kAck && e.input_id != "in2") {
      ++acks;
      const bool first = e.input_id == "in1";
      EXPECT_EQ(e.first_position, first ? kPrefix : kYLate) << e.input_id;
      EXPECT_EQ(e.end_position, first ? kYOut : kYLate + kLate) << e.input_id;
    }
    if (e.kind != Kind::kTokens) continue;
    ++tokens;
    EXPECT_EQ(e.first_position, next_y[e.stream]++) << "stream " << e.stream;
  }
  EXPECT_EQ(acks, 2);
  EXPECT_EQ(tokens, 2 * kTokens);
}

const std::vector<std::vector<int32_t>> kAllSee(kModelStreams, {0, 1, 2, 3});
// Both outputs branches: their model streams see the prefix, the input
// streams and themselves, and the input streams (model stream 0 counts as
// one) do not see them.
const std::vector<std::vector<int32_t>> kBranchSees = {
    {0, 1}, {0, 1}, {0, 1, kReasoning}, {0, 1, kOutput}};

// The must-show property for a served multi-stream session: input known at
// the start is prefilled as one chunk, two output streams write in lockstep
// at y = 8.., and input arriving after the third step lands at the current
// step (y = 11) and is fed one entry per step beside them. The result is the
// full pass over exactly these entries, each tagged with its model stream.
TEST_F(MultiStreamSessionTest, LateInputWhileWritingEqualsMaskedFullPass) {
  const std::vector<SessionEvent> events =
      RunLateInput(ThreeStreams(StreamVisibility::kAll));
  ExpectLateInputPositions(events);
  const Reference r = BuildReference(events, /*silence=*/-1);
  ASSERT_EQ(r.sampled.size(), 2u * kTokens);
  ExpectMatchesFullPass("aligned", *model_, r, kAllSee);

  // The comparison is sharp: entries tagged with the session's stream
  // numbers (the wrong stream embeddings), or other late input, give other
  // log-probabilities.
  std::vector<MaskedEntry> session_tags = r.entries;
  for (MaskedEntry& e : session_tags) {
    if (e.stream == kOutput)
      e.stream = kOut;
    else if (e.stream == kUser)
      e.stream = kIn;
    else if (e.stream == kReasoning)
      e.stream = kThink;
  }
  EXPECT_GT(Check(*model_, r, session_tags, kAllSee).second, 10 * kLogprobTol);
  EXPECT_GT(Check(*model_, r, ReplaceLate(r, kYLate, Tok(90)), kAllSee).second,
            10 * kLogprobTol);
}

// The rows layout: the same run, with every model stream present at every
// position from the prefix on. Rows 5..7 hold the input on kUser and
// silence elsewhere (model stream 0 too), rows 8..17 the two outputs, the
// late input at 11..13 and silence on the rest; each output token comes
// from its own stream's entry one row up (the first from its silence at
// y = 7). After the turns, the session is idle and adds no row: the next
// input lands right after the last one (y = 18).
TEST_F(MultiStreamSessionTest, RowsLayoutEqualsMaskedFullPassWithSilence) {
  UseModel(rows_model_);
  SessionOptions o = ThreeStreams(StreamVisibility::kAll);
  o.rows = true;
  o.silence_token_id = kSilence;
  const std::vector<SessionEvent> events =
      RunLateInput(o, [&](uint64_t h, RecordingSessionSink& sink) {
        engine_->SessionAppend(h, {"in2", kIn, Tokens(80, 2), {}});
        ASSERT_TRUE(sink.WaitFor(Kind::kAck, 3));
      });
  ExpectLateInputPositions(events);
  const int y_end = kYOut + kTokens;
  bool in2 = false;
  for (const SessionEvent& e : events) {
    if (e.kind != Kind::kAck || e.input_id != "in2") continue;
    in2 = true;
    EXPECT_EQ(e.first_position, y_end);
    EXPECT_EQ(e.end_position, y_end + 2);
  }
  EXPECT_TRUE(in2);
  const Reference r = BuildReference(events, kSilence);
  ASSERT_EQ(r.sampled.size(), 2u * kTokens);
  ASSERT_EQ(r.entries.size(),
            static_cast<size_t>(kPrefix + kModelStreams * (y_end - kPrefix)));
  ExpectMatchesFullPass("rows", *rows_model_, r, kAllSee);

  // Sharp: another filler than the silence token, or silence where the
  // late input is, give other log-probabilities.
  std::vector<MaskedEntry> other_filler = r.entries;
  for (MaskedEntry& e : other_filler) {
    if (e.y >= kPrefix && e.token == kSilence) e.token = kSilence + 1;
  }
  EXPECT_GT(Check(*rows_model_, r, other_filler, kAllSee).second,
            10 * kLogprobTol);
  EXPECT_GT(
      Check(*rows_model_, r, ReplaceLate(r, kYLate, kSilence), kAllSee).second,
      10 * kLogprobTol);
}

// Branches on a multi-stream model: both output streams BRANCH, so their
// model streams see the prefix, the input streams and themselves, and the
// input streams (model stream 0 counts as one) do not see them.
TEST_F(MultiStreamSessionTest, BranchesEqualMaskedFullPass) {
  const std::vector<SessionEvent> events =
      RunLateInput(ThreeStreams(StreamVisibility::kBranch));
  ExpectLateInputPositions(events);
  const Reference r = BuildReference(events, /*silence=*/-1);
  ASSERT_EQ(r.sampled.size(), 2u * kTokens);
  ExpectMatchesFullPass("branches", *model_, r, kBranchSees);
  // Sharp: with every stream seeing every other the results differ.
  EXPECT_GT(Check(*model_, r, r.entries, kAllSee).second, 10 * kLogprobTol);
}

// Late input at random moments, one to three pieces of 1-4 tokens (6 draws a
// layout; 40 passed once), on both layouts, the outputs seeing every stream or
// as branches: each piece acknowledged where the layout rule puts it, and the
// outputs still the masked full pass over exactly those entries.
TEST_F(MultiStreamSessionTest, RandomLateInputsEqualMaskedFullPass) {
  std::mt19937 rng(7);
  for (const bool rows : {false, true}) {
    UseModel(rows ? rows_model_ : model_);
    for (int round = 0; round < 6; ++round) {
      SCOPED_TRACE(absl::StrCat(rows ? "rows" : "aligned", " round ", round));
      std::map<std::string, std::vector<int32_t>> inputs = {
          {"in1", FirstInput()}};
      std::vector<Late> lates;
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        Late l{absl::StrCat("late", i), 1 + static_cast<int>(rng() % 8), {}};
        const int len = 1 + static_cast<int>(rng() % 4);
        for (int t = 0; t < len; ++t) {
          l.tokens.push_back(Tok(100 + static_cast<int>(rng() % 50)));
        }
        inputs[l.id] = l.tokens;
        lates.push_back(std::move(l));
      }
      const bool branches = rng() % 2 == 1;
      SessionOptions o = ThreeStreams(branches ? StreamVisibility::kBranch
                                               : StreamVisibility::kAll);
      o.rows = rows;
      o.silence_token_id = rows ? kSilence : -1;
      const std::vector<SessionEvent> events = RunInputs(o, lates);
      int acks = 0;
      for (const SessionEvent& e : events) acks += e.kind == Kind::kAck;
      EXPECT_EQ(acks, 1 + n);
      const Reference r = BuildReference(events, rows ? kSilence : -1, inputs);
      ASSERT_EQ(r.sampled.size(), 2u * kTokens);
      ExpectMatchesFullPass(rows ? "random rows" : "random aligned",
                            rows ? *rows_model_ : *model_, r,
                            branches ? kBranchSees : kAllSee);
    }
  }
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
      {"rows without silence", [](SessionOptions& o) { o.rows = true; },
       "needs the model's silence token"},
      {"rows on a single-stream model",
       [](SessionOptions& o) {
         o.rows = true;
         o.model_streams = 0;
         o.aligned = false;
       },
       "needs a multi-stream model"},
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
