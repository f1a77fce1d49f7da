// The fixture of the session tests on the real model ($BRAID_MODEL): an
// engine with a ModelExecutor, helpers to run Generate requests and session
// turns, and the prompts they use (session_model_test, session_keep_test).
#ifndef BRAID_BATCHING_TESTING_SESSION_MODEL_FIXTURE_H_
#define BRAID_BATCHING_TESTING_SESSION_MODEL_FIXTURE_H_

#include <cstdlib>
#include <memory>
#include <string>
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

inline constexpr int kBlockSize = 16;

class SessionModelTest : public ::testing::Test {
 protected:
  using RecordingSessionSink = testing::RecordingSessionSink;
  using RecordingSink = testing::RecordingSink;
  using Kind = SessionEvent::Kind;

  static void SetUpTestSuite() {
    auto loaded = model::testing::LoadSmolLm2();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->tokenizer.release();
    model_ = loaded->model.release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
    model_ = nullptr;
    tokenizer_ = nullptr;
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

  // Opens session `o` and runs its first turn (input `user`, to stream 2)
  // until its `turn1` entries are computed; the handle (0 on failure), the
  // events in *sink.
  uint64_t FirstTurn(const SessionOptions& o, const std::vector<int32_t>& user,
                     int64_t turn1,
                     const std::shared_ptr<RecordingSessionSink>& sink) {
    auto h = engine_->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return 0;
    engine_->SessionAppend(*h, {"t1", 1, user, {2}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 1));
    WaitSettled(turn1);
    return *h;
  }

  // FirstTurn, then closed with keep; its events.
  std::shared_ptr<RecordingSessionSink> KeptAfterFirstTurn(
      const SessionOptions& o, const std::vector<int32_t>& user,
      int64_t turn1) {
    auto sink = std::make_shared<RecordingSessionSink>();
    const uint64_t h = FirstTurn(o, user, turn1, sink);
    engine_->CloseSession(h, /*keep=*/true);
    EXPECT_TRUE(sink->WaitFor(Kind::kClosed, 1));
    return sink;
  }

  // Two turns of session `o` never closed (turn 1 `user`, leaving `turn1`
  // entries; turn 2 `user2`), then closed; the tokens of stream 2's second
  // turn.
  std::vector<SampledToken> SecondTurnNeverClosed(
      const SessionOptions& o, const std::vector<int32_t>& user,
      const std::vector<int32_t>& user2, int64_t turn1) {
    auto sink = std::make_shared<RecordingSessionSink>();
    const uint64_t h = FirstTurn(o, user, turn1, sink);
    engine_->SessionAppend(h, {"t2", 1, user2, {2}});
    EXPECT_TRUE(sink->WaitFor(Kind::kTurnEnd, 2));
    engine_->CloseSession(h);
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

inline constexpr char kSystem[] =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
inline constexpr char kUser[] =
    "<|im_start|>user\nTell me a short story about a fox.<|im_end|>\n"
    "<|im_start|>assistant\n";
inline constexpr char kUser2[] =
    "<|im_end|>\n<|im_start|>user\nAnd now one about a bear.<|im_end|>\n"
    "<|im_start|>assistant\n";

}  // namespace braid::batching

#endif  // BRAID_BATCHING_TESTING_SESSION_MODEL_FIXTURE_H_
