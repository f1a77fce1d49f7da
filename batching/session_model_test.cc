// Sessions on the real model ($BRAID_MODEL) through the engine and
// ModelExecutor (docs/MULTISTREAM.md, "What proves it").
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/recording_sink.h"
#include "batching/testing/session_sink.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/testing/sequence_runner.h"
#include "model/testing/smollm2.h"

namespace braid::batching {
namespace {

using testing::RecordingSessionSink;
using testing::RecordingSink;
using Kind = SessionEvent::Kind;

constexpr int kBlockSize = 16;

class SessionModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = model::testing::LoadSmolLm2();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->tokenizer.release();
    model_ = loaded->model.release();
  }

  void SetUp() override { Restart(DefaultOptions()); }

  static EngineOptions DefaultOptions() {
    EngineOptions o;
    o.scheduler.num_blocks = 256;
    o.scheduler.block_size = kBlockSize;
    o.scheduler.max_batch_tokens = 256;
    o.scheduler.max_num_seqs = 16;
    o.max_context_tokens = 2048;
    return o;
  }

  // A fresh engine (nothing in the prefix cache) with options `o`.
  void Restart(const EngineOptions& o) {
    ASSERT_NE(model_, nullptr);
    engine_.reset();
    executor_ = std::make_unique<ModelExecutor>(model_, kBlockSize,
                                                o.scheduler.num_blocks);
    engine_ = std::make_unique<Engine>(executor_.get(), tokenizer_, o,
                                       testing::FifoQueues());
  }

  static std::vector<int32_t> Encode(const std::string& text) {
    return tokenizer_->Encode(text, false, true);
  }

  static SessionStreamOptions Output(std::string name, int max_tokens,
                                     uint64_t seed = 0, float temp = 0) {
    SessionStreamOptions o;
    o.name = std::move(name);
    o.output = true;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.sampling.seed = seed;
    o.sampling.temperature = temp;
    o.sampling.top_k = temp > 0 ? 40 : 0;
    o.sampling.logprobs = true;
    o.sampling.top_logprobs = 5;
    return o;
  }

  // One Generate request run alone; returns its chunks' tokens (with
  // logprobs when asked).
  std::vector<SampledToken> Generate(const std::vector<int32_t>& prompt,
                                     int max_tokens, uint64_t seed = 0,
                                     float temp = 0) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.arrival = absl::Now();
    r.sampling.seed = seed;
    r.sampling.temperature = temp;
    r.sampling.top_k = temp > 0 ? 40 : 0;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 5;
    auto sink = std::make_shared<RecordingSink>();
    EXPECT_TRUE(engine_->Submit(r, sink).ok());
    EXPECT_TRUE(sink->WaitFinal().final);
    std::vector<SampledToken> out;
    for (const OutputChunk& c : sink->Chunks()) {
      out.insert(out.end(), c.logprobs.begin(), c.logprobs.end());
    }
    return out;
  }

  // One Generate request run alone; returns its chunks.
  std::vector<OutputChunk> GenerateChunks(const std::vector<int32_t>& prompt,
                                          int max_tokens,
                                          std::vector<std::string> stop) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.arrival = absl::Now();
    r.stop = std::move(stop);
    auto sink = std::make_shared<RecordingSink>();
    EXPECT_TRUE(engine_->Submit(r, sink).ok());
    EXPECT_TRUE(sink->WaitFinal().final);
    return sink->Chunks();
  }

  // Two turns of session `o` never closed (turn 1 `user`, leaving `turn1`
  // entries; turn 2 `user2`), then closed; the tokens of stream 2's second
  // turn.
  std::vector<SampledToken> SecondTurnNeverClosed(
      const SessionOptions& o, const std::vector<int32_t>& user,
      const std::vector<int32_t>& user2, int64_t turn1) {
    auto sink = std::make_shared<RecordingSessionSink>();
    auto h = engine_->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return {};
    engine_->SessionAppend(*h, {"t1", 1, user, {2}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
    WaitSettled(turn1);
    engine_->SessionAppend(*h, {"t2", 1, user2, {2}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 2));
    engine_->CloseSession(*h);
    EXPECT_TRUE(sink->WaitFor(Kind::kClosed, 1));
    return TurnTokens(sink->events(), 2, 1);
  }

  // The tokens written on `stream` in its turn number `turn` (from 0).
  static std::vector<SampledToken> TurnTokens(
      const std::vector<SessionEvent>& events, int stream, int turn) {
    std::vector<SampledToken> out;
    int t = 0;
    for (const SessionEvent& e : events) {
      if (e.stream != stream) continue;
      if (e.kind == Kind::kTurnEnd) ++t;
      if (e.kind == Kind::kTokens && t == turn) {
        out.insert(out.end(), e.tokens.begin(), e.tokens.end());
      }
    }
    return out;
  }

  // Equal tokens and log-probabilities, bit for bit.
  static void ExpectSameTokens(const std::vector<SampledToken>& got,
                               const std::vector<SampledToken>& want) {
    ASSERT_EQ(Ids(got), Ids(want));
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[k].logprob, want[k].logprob) << "token " << k;
      ASSERT_EQ(got[k].top.size(), want[k].top.size());
      for (size_t j = 0; j < want[k].top.size(); ++j) {
        EXPECT_EQ(got[k].top[j].logprob, want[k].top[j].logprob) << k;
      }
    }
  }

  static const SessionEvent* Find(const std::vector<SessionEvent>& events,
                                  Kind kind, int nth = 0) {
    for (const SessionEvent& e : events) {
      if (e.kind == kind && nth-- == 0) return &e;
    }
    return nullptr;
  }

  static std::vector<int32_t> Ids(const std::vector<SampledToken>& t) {
    std::vector<int32_t> ids;
    for (const SampledToken& s : t) ids.push_back(s.token_id);
    return ids;
  }

  // Waits until the engine has computed every entry it holds.
  void WaitSettled(int64_t computed) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (engine_->Stats().computed_tokens < computed &&
           absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(engine_->Stats().computed_tokens, computed);
  }

  void ExpectAllFree() {
    const EngineStats s = engine_->Stats();
    EXPECT_EQ(s.sessions, 0);
    EXPECT_EQ(s.kept_sessions, 0);
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaModel* model_ = nullptr;
  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

const char kSystem[] =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
const char kUser[] =
    "<|im_start|>user\nTell me a short story about a fox.<|im_end|>\n"
    "<|im_start|>assistant\n";
const char kUser2[] =
    "<|im_end|>\n<|im_start|>user\nAnd now one about a bear.<|im_end|>\n"
    "<|im_start|>assistant\n";

TEST_F(SessionModelTest, OneStreamIsIdenticalToGenerate) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), user.begin(), user.end());
  const std::vector<SampledToken> expected = Generate(prompt, 16);

  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 16)};
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine_->SessionAppend(*h, {"in1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  EXPECT_EQ(sink->Tokens(2), Ids(expected));
  for (const SessionEvent& e : sink->events()) {
    if (e.kind != Kind::kAck) continue;
    EXPECT_EQ(e.first_position, static_cast<int64_t>(prefix.size()));
    EXPECT_EQ(e.end_position, static_cast<int64_t>(prompt.size()));
  }
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  ExpectAllFree();
}

// Greedy branches: each must equal an independent request, which it could not
// if it saw another branch's entries. (Sampled branches are not asserted
// token-identical: see docs/MULTISTREAM.md, "Where the code stands".)
// Branches (n > 1 over one prompt) against independent requests with the
// same seeds: greedy and sampled (temperature 0.9, top-k 40, a seed per
// branch), the same tokens and log-probabilities bit for bit, while the
// prompt's KV blocks are stored once. The branches' entries interleave in one
// context; attention sums a query's visible entries by rank, so what else
// shares the context does not touch its arithmetic.
TEST_F(SessionModelTest, BranchesEqualIndependentRequestsAndShareThePrompt) {
  constexpr int kBranches = 4, kTokens = 12;
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), user.begin(), user.end());
  for (const float temp : {0.0f, 0.9f}) {
    SCOPED_TRACE(temp > 0 ? "sampled" : "greedy");
    std::vector<std::vector<SampledToken>> expected;
    for (int b = 0; b < kBranches; ++b) {
      expected.push_back(Generate(prompt, kTokens, 100 + b, temp));
    }
    // A fresh engine, so nothing comes from the prefix cache.
    SetUp();
    SessionOptions o;
    o.prefix = prefix;
    o.streams = {SessionStreamOptions{.name = "user"}};
    std::vector<int> branches;
    for (int b = 0; b < kBranches; ++b) {
      o.streams.push_back(Output("b", kTokens, 100 + b, temp));
      o.streams.back().visibility = StreamVisibility::kBranch;
      branches.push_back(b + 2);
    }
    auto sink = std::make_shared<RecordingSessionSink>();
    auto h = engine_->OpenSession(o, sink);
    ASSERT_TRUE(h.ok());
    engine_->SessionAppend(*h, {"in1", 1, user, branches});
    ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, kBranches));
    const std::vector<SessionEvent> events = sink->events();
    std::set<std::vector<int32_t>> distinct;
    for (int b = 0; b < kBranches; ++b) {
      SCOPED_TRACE(absl::StrCat("branch ", b));
      const std::vector<SampledToken> got = TurnTokens(events, b + 2, 0);
      ExpectSameTokens(got, expected[b]);
      distinct.insert(Ids(got));
    }
    // Sampling with different seeds makes the branches differ (so the
    // comparison above is not trivially between equal greedy outputs).
    if (temp > 0) EXPECT_GT(distinct.size(), 1u);
    // Every entry in one context: the prompt once, then K * T branch tokens.
    const int entries = static_cast<int>(prompt.size()) + kBranches * kTokens;
    WaitSettled(entries);
    const EngineStats s = engine_->Stats();
    const int used = s.kv_blocks_total - s.kv_blocks_free;
    const int per_request =
        (static_cast<int>(prompt.size()) + kTokens + kBlockSize - 1) /
        kBlockSize;
    std::printf("session blocks %d, %d independent requests %d\n", used,
                kBranches, kBranches * per_request);
    EXPECT_EQ(used, (entries + kBlockSize - 1) / kBlockSize);
    EXPECT_LT(used, kBranches * per_request);
    engine_->Cancel(*h);
    ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
    EXPECT_TRUE(absl::IsCancelled(sink->events().back().status));
    ExpectAllFree();
    SetUp();
  }
}

TEST_F(SessionModelTest, LateInputEqualsRecomputingTheContext) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  const std::vector<int32_t> late = Encode(" (Make the fox blue.)");
  Engine* engine = engine_.get();
  uint64_t handle = 0;
  int seen = 0;
  // After the third output token, append more input (engine thread: it
  // lands before the next step).
  auto sink =
      std::make_shared<RecordingSessionSink>([&](const SessionEvent& e) {
        if (e.kind == Kind::kTokens && e.stream == 2 && ++seen == 3) {
          engine->SessionAppend(handle, {"late", 1, late, {}});
        }
      });
  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 8)};
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok());
  handle = *h;
  engine_->SessionAppend(*h, {"in1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  std::vector<SampledToken> out;
  int64_t late_first = -1, late_end = -1;
  for (const SessionEvent& e : sink->events()) {
    if (e.kind == Kind::kTokens) out.push_back(e.tokens[0]);
    if (e.kind == Kind::kAck && e.input_id == "late") {
      late_first = e.first_position;
      late_end = e.end_position;
    }
  }
  ASSERT_EQ(out.size(), 8u);
  // The late input landed right after the third output token.
  const int64_t y_after3 = prefix.size() + user.size() + 3;
  EXPECT_EQ(late_first, y_after3);
  EXPECT_EQ(late_end, y_after3 + static_cast<int64_t>(late.size()));
  // Recompute the whole context as one ordinary sequence (stream 0,
  // y = index), chunked as the session computed it: prompt, o1, o2, then o3
  // with the late input, then one token per step. Every sampled position
  // must give the same logits, bit for bit.
  // (The engine must be gone: the model runs one Forward at a time.)
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  engine_.reset();
  model::testing::SequenceRunner ref(*model_, 512);
  std::vector<float> logits;
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), user.begin(), user.end());
  ASSERT_TRUE(ref.Forward(prompt, false, &logits).ok());
  for (size_t k = 0; k < out.size(); ++k) {
    if (k > 0) {
      const int32_t prev[1] = {out[k - 1].token_id};
      ASSERT_TRUE(ref.Forward(prev, false, &logits).ok());
      // o3's entry and the late input: two runs (two streams) of one step.
      if (k == 3) ASSERT_TRUE(ref.Forward(late, false, &logits).ok());
    }
    SampledToken want;
    ComputeLogprobs(logits, out[k].token_id, 5, &want);
    EXPECT_EQ(out[k].logprob, want.logprob) << "token " << k;
    ASSERT_EQ(out[k].top.size(), want.top.size());
    for (size_t j = 0; j < want.top.size(); ++j) {
      EXPECT_EQ(out[k].top[j].token_id, want.top[j].token_id) << k;
      EXPECT_EQ(out[k].top[j].logprob, want.top[j].logprob) << k;
    }
  }
}

TEST_F(SessionModelTest, SecondTurnComputesOnlyItsNewTokens) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  const std::vector<int32_t> user2 = Encode(
      "<|im_end|>\n<|im_start|>user\nAnd now one about a bear.<|im_end|>\n"
      "<|im_start|>assistant\n");
  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 10)};
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok());
  engine_->SessionAppend(*h, {"t1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  const int64_t turn1 = prefix.size() + user.size() + 10;
  WaitSettled(turn1);
  engine_->SessionAppend(*h, {"t2", 1, user2, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 2));
  WaitSettled(turn1 + static_cast<int64_t>(user2.size()) + 10);
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  ExpectAllFree();
}

// Keep / resume (docs/MULTISTREAM.md): a session kept between two turns
// (close with keep) and resumed computes only the second turn's tokens, its
// whole context (the partial last block too) coming back from the prefix
// cache, and writes exactly what a session never closed writes.
TEST_F(SessionModelTest, KeptSessionResumesAsIfNeverClosed) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser),
                             user2 = Encode(kUser2);
  SessionOptions o;
  o.session_id = "s1";
  o.owner = "client";
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 10)};
  const int64_t turn1 = prefix.size() + user.size() + 10;
  const int64_t turn2 = user2.size() + 10;
  ASSERT_NE(turn1 % kBlockSize, 0) << "the test wants a partial last block";
  const std::vector<SampledToken> want =
      SecondTurnNeverClosed(o, user, user2, turn1);
  ASSERT_EQ(want.size(), 10u);

  // Kept between the turns, on a fresh engine.
  SetUp();
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine_->SessionAppend(*h, {"t1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  WaitSettled(turn1);
  engine_->CloseSession(*h, /*keep=*/true);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  EXPECT_TRUE(sink->events().back().status.ok());
  EngineStats st = engine_->Stats();
  EXPECT_EQ(st.sessions, 0);
  EXPECT_EQ(st.kept_sessions, 1);
  // Kept blocks are free (evictable) cache.
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  EXPECT_EQ(st.kv_blocks_cached, (turn1 + kBlockSize - 1) / kBlockSize);
  // Only its client resumes it, only while kept; its id stays taken.
  auto noop = [](const SessionOptions&) {};
  EXPECT_TRUE(absl::IsNotFound(
      engine_->ResumeSession("other", "s1", sink, noop).status()));
  EXPECT_TRUE(absl::IsNotFound(
      engine_->ResumeSession("client", "s9", sink, noop).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(engine_->OpenSession(o, sink).status()));
  auto resumed = std::make_shared<RecordingSessionSink>();
  int num_streams = 0;
  h = engine_->ResumeSession("client", "s1", resumed,
                             [&](const SessionOptions& r) {
                               num_streams = static_cast<int>(r.streams.size());
                             });
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(num_streams, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      engine_->ResumeSession("client", "s1", resumed, noop).status()));
  const EngineStats before = engine_->Stats();
  engine_->SessionAppend(*h, {"t2", 1, user2, {2}});
  ASSERT_TRUE(resumed->WaitFor(Kind::kTurnEnd, 1));
  WaitSettled(before.computed_tokens + turn2);
  EXPECT_EQ(engine_->Stats().prefix_hit_tokens - before.prefix_hit_tokens,
            turn1);
  const std::vector<SessionEvent> events = resumed->events();
  ASSERT_EQ(events[0].kind, Kind::kOpened);
  EXPECT_TRUE(events[0].resumed);
  EXPECT_EQ(events[0].context_tokens, turn1);
  const SessionEvent* ack = Find(events, Kind::kAck);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->first_position, turn1);
  ExpectSameTokens(TurnTokens(events, 2, 0), want);
  engine_->CloseSession(*h);
  ASSERT_TRUE(resumed->WaitFor(Kind::kClosed, 1));
  ExpectAllFree();
}

// Kept sessions never hold blocks others need: a request for the whole KV
// pool evicts them, and the session resumes by recomputing its entries, each
// with the attention kernels it had (decoded entries one-token ones), so
// the next turn equals a session never closed, log-probabilities bit for
// bit.
TEST_F(SessionModelTest, EvictedKeptSessionIsRecomputed) {
  EngineOptions eo = DefaultOptions();
  eo.scheduler.num_blocks = 20;
  Restart(eo);
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser),
                             user2 = Encode(kUser2);
  SessionOptions o;
  o.session_id = "s2";
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 10)};
  const int64_t turn1 = prefix.size() + user.size() + 10;
  const int64_t turn2 = user2.size() + 10;
  const std::vector<SampledToken> want =
      SecondTurnNeverClosed(o, user, user2, turn1);
  ASSERT_EQ(want.size(), 10u);
  Restart(eo);
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine_->SessionAppend(*h, {"t1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  WaitSettled(turn1);
  engine_->CloseSession(*h, /*keep=*/true);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  // Every block of the pool: prompt 318 + 2 output tokens.
  std::vector<int32_t> prompt;
  while (prompt.size() < 318) {
    for (int32_t t : Encode(kUser)) prompt.push_back(t);
  }
  prompt.resize(318);
  EXPECT_EQ(Generate(prompt, 2).size(), 2u);
  auto resumed = std::make_shared<RecordingSessionSink>();
  h = engine_->ResumeSession("", "s2", resumed, [](const SessionOptions&) {});
  ASSERT_TRUE(h.ok()) << h.status();
  const EngineStats before = engine_->Stats();
  engine_->SessionAppend(*h, {"t2", 1, user2, {2}});
  ASSERT_TRUE(resumed->WaitFor(Kind::kTurnEnd, 1));
  WaitSettled(before.computed_tokens + turn1 + turn2);
  EXPECT_EQ(engine_->Stats().prefix_hit_tokens, before.prefix_hit_tokens);
  ExpectSameTokens(TurnTokens(resumed->events(), 2, 0), want);
  engine_->CloseSession(*h);
  ASSERT_TRUE(resumed->WaitFor(Kind::kClosed, 1));
  ExpectAllFree();
}

// A session's input cut into one-token chunks (its prompt paced beside
// decoding requests) computes what it computes alone, in one chunk: the
// turn's tokens and log-probabilities are the same bit for bit.
TEST_F(SessionModelTest, SessionBesideDecodingRequestsEqualsAlone) {
  EngineOptions eo = DefaultOptions();
  eo.scheduler.max_prefill_tokens_while_decoding = 1;
  eo.scheduler.prefill_tokens_per_decode_token = 0;
  Restart(eo);
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  SessionOptions o;
  o.session_id = "s";
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 8)};
  auto run_turn = [&] {
    auto sink = std::make_shared<RecordingSessionSink>();
    auto h = engine_->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    engine_->SessionAppend(*h, {"t1", 1, user, {2}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
    engine_->CloseSession(*h);
    EXPECT_TRUE(sink->WaitFor(Kind::kClosed, 1));
    return TurnTokens(sink->events(), 2, 0);
  };
  const std::vector<SampledToken> alone = run_turn();
  ASSERT_EQ(alone.size(), 8u);
  Restart(eo);
  std::vector<std::shared_ptr<RecordingSink>> others;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r;
    r.prompt = Encode(kUser2);
    r.prompt.push_back(100 + i);
    r.max_tokens = 400;
    r.ignore_eos = true;
    r.arrival = absl::Now();
    others.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine_->Submit(r, others.back()).ok());
  }
  for (auto& s : others) {
    while (s->Chunks().size() < 2) absl::SleepFor(absl::Milliseconds(1));
  }
  const int64_t steps_before = engine_->Stats().steps;
  ExpectSameTokens(run_turn(), alone);
  // Its input went in a token a step beside them.
  EXPECT_GE(engine_->Stats().steps - steps_before,
            static_cast<int64_t>(prefix.size() + user.size()));
  for (auto& s : others) EXPECT_FALSE(s->Chunks().empty());
}

TEST_F(SessionModelTest, StopStringsEndTheTurnLikeGenerate) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), user.begin(), user.end());
  std::string full;
  for (const OutputChunk& c : GenerateChunks(prompt, 24, {})) full += c.text;
  // A stop string from the middle of the output.
  const std::string stop = full.substr(full.size() / 2, 3);
  std::vector<int32_t> want_ids;
  std::string want_text;
  FinishReason want_reason = FinishReason::kNone;
  std::string want_matched;
  for (const OutputChunk& c : GenerateChunks(prompt, 24, {stop})) {
    want_ids.insert(want_ids.end(), c.token_ids.begin(), c.token_ids.end());
    want_text += c.text;
    if (c.final) {
      want_reason = c.finish_reason;
      want_matched = c.matched_stop;
    }
  }
  ASSERT_EQ(want_reason, FinishReason::kStop);
  ASSERT_LT(want_ids.size(), 24u);

  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 24)};
  o.streams[1].stop = {stop};
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine_->SessionAppend(*h, {"in1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  std::string text;
  for (const SessionEvent& e : sink->events()) {
    if (e.kind == Kind::kTokens || e.kind == Kind::kTurnEnd) text += e.text;
  }
  const SessionEvent* end = Find(sink->events(), Kind::kTurnEnd);
  EXPECT_EQ(sink->Tokens(2), want_ids);
  EXPECT_EQ(text, want_text);
  EXPECT_EQ(text.find(stop), std::string::npos);
  EXPECT_EQ(end->finish_reason, FinishReason::kStop);
  EXPECT_EQ(end->matched_stop, stop);
  EXPECT_EQ(want_matched, stop);
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
}

// The served context length bounds a session: input that would overflow it
// is refused (the session goes on), and a turn that fills it ends LENGTH.
TEST_F(SessionModelTest, ContextLengthBoundsTheSession) {
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  EngineOptions eo = DefaultOptions();
  eo.max_context_tokens = static_cast<int>(prefix.size() + user.size()) + 12;
  Restart(eo);
  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 100)};
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<int32_t> big = user;
  big.insert(big.end(), user.begin(), user.end());
  engine_->SessionAppend(*h, {"big", 1, big, {}});
  engine_->SessionAppend(*h, {"t1", 1, user, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  std::vector<SessionEvent> events = sink->events();
  const SessionEvent* error = Find(events, Kind::kError);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->input_id, "big");
  EXPECT_TRUE(absl::IsOutOfRange(error->status)) << error->status;
  EXPECT_NE(error->status.message().find("--context_length"),
            std::string::npos);
  const SessionEvent* ack = Find(events, Kind::kAck);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->input_id, "t1");
  EXPECT_EQ(ack->first_position, static_cast<int64_t>(prefix.size()));
  const SessionEvent* end = Find(events, Kind::kTurnEnd);
  EXPECT_EQ(end->finish_reason, FinishReason::kLength);
  EXPECT_EQ(end->output_tokens, 12);
  // Full: not one more token, and the session still answers.
  engine_->SessionAppend(*h, {"t2", 1, {user[0]}, {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kError, 2));
  engine_->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  EXPECT_TRUE(sink->events().back().status.ok());
  ExpectAllFree();
}

TEST_F(SessionModelTest, IdleSessionsAreKeptAndClientsAreLimited) {
  EngineOptions eo = DefaultOptions();
  eo.session_idle_timeout = absl::Seconds(1);
  eo.max_sessions_per_client = 1;
  eo.max_kept_sessions = 1;
  Restart(eo);
  SessionOptions o;
  o.session_id = "x";
  o.owner = "a";
  o.prefix = Encode(kSystem);
  o.streams = {SessionStreamOptions{.name = "user"}, Output("out", 4)};
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  // One open session per client; another client may use the same id.
  SessionOptions y = o;
  y.session_id = "y";
  auto other = std::make_shared<RecordingSessionSink>();
  absl::Status limited = engine_->OpenSession(y, other).status();
  EXPECT_TRUE(absl::IsResourceExhausted(limited)) << limited;
  EXPECT_NE(limited.message().find("--max_sessions_per_client"),
            std::string::npos);
  SessionOptions b = o;
  b.owner = "b";
  auto hb = engine_->OpenSession(b, other);
  ASSERT_TRUE(hb.ok()) << hb.status();
  engine_->CloseSession(*hb);
  ASSERT_TRUE(other->WaitFor(Kind::kClosed, 1));
  // A turn, then silence: the session is kept and told why.
  engine_->SessionAppend(*h, {"t1", 1, Encode(kUser), {2}});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1, absl::Seconds(30)));
  const absl::Status idle = sink->events().back().status;
  EXPECT_TRUE(absl::IsDeadlineExceeded(idle)) << idle;
  EXPECT_NE(idle.message().find("--session_idle_timeout_s"), std::string::npos);
  EXPECT_EQ(engine_->Stats().kept_sessions, 1);
  EXPECT_EQ(engine_->Stats().sessions, 0);
  // Its slot is free; keeping another drops it (max_kept_sessions = 1).
  auto sink_y = std::make_shared<RecordingSessionSink>();
  h = engine_->OpenSession(y, sink_y);
  ASSERT_TRUE(h.ok()) << h.status();
  engine_->CloseSession(*h, /*keep=*/true);
  ASSERT_TRUE(sink_y->WaitFor(Kind::kClosed, 1));
  EXPECT_EQ(engine_->Stats().kept_sessions, 1);
  auto noop = [](const SessionOptions&) {};
  EXPECT_TRUE(
      absl::IsNotFound(engine_->ResumeSession("a", "x", sink, noop).status()));
  auto resumed = std::make_shared<RecordingSessionSink>();
  h = engine_->ResumeSession("a", "y", resumed, noop);
  ASSERT_TRUE(h.ok()) << h.status();
  SessionOptions z = o;
  z.session_id = "z";
  EXPECT_TRUE(
      absl::IsResourceExhausted(engine_->OpenSession(z, other).status()));
  ASSERT_TRUE(resumed->WaitFor(Kind::kOpened, 1));
  engine_->CloseSession(*h);
  ASSERT_TRUE(resumed->WaitFor(Kind::kClosed, 1));
  ExpectAllFree();
}

}  // namespace
}  // namespace braid::batching
