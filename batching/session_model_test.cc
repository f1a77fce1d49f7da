// Sessions on the real model ($BRAID_MODEL) through the engine and
// ModelExecutor (docs/MULTISTREAM.md, "What proves it").
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

  void SetUp() override {
    ASSERT_NE(model_, nullptr);
    EngineOptions o;
    o.scheduler.num_blocks = 256;
    o.scheduler.block_size = kBlockSize;
    o.scheduler.max_batch_tokens = 256;
    o.scheduler.max_num_seqs = 16;
    o.max_context_tokens = 2048;
    executor_ = std::make_unique<ModelExecutor>(model_, kBlockSize, 256);
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
TEST_F(SessionModelTest, BranchesEqualIndependentRequestsAndShareThePrompt) {
  constexpr int kBranches = 4, kTokens = 12;
  const std::vector<int32_t> prefix = Encode(kSystem), user = Encode(kUser);
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), user.begin(), user.end());
  std::vector<std::vector<int32_t>> expected;
  for (int b = 0; b < kBranches; ++b) {
    expected.push_back(Ids(Generate(prompt, kTokens)));
  }
  // A fresh engine, so nothing comes from the prefix cache.
  SetUp();
  SessionOptions o;
  o.prefix = prefix;
  o.streams = {SessionStreamOptions{.name = "user"}};
  std::vector<int> branches;
  for (int b = 0; b < kBranches; ++b) {
    o.streams.push_back(Output("b", kTokens));
    o.streams.back().visibility = StreamVisibility::kBranch;
    branches.push_back(b + 2);
  }
  auto sink = std::make_shared<RecordingSessionSink>();
  auto h = engine_->OpenSession(o, sink);
  ASSERT_TRUE(h.ok());
  engine_->SessionAppend(*h, {"in1", 1, user, branches});
  ASSERT_TRUE(sink->WaitFor(Kind::kTurnEnd, kBranches));
  for (int b = 0; b < kBranches; ++b) {
    EXPECT_EQ(sink->Tokens(b + 2), expected[b]) << "branch " << b;
  }
  // Every entry in one context: the prompt once, then K * T branch tokens.
  const int entries = static_cast<int>(prompt.size()) + kBranches * kTokens;
  WaitSettled(entries);
  const EngineStats s = engine_->Stats();
  const int used = s.kv_blocks_total - s.kv_blocks_free;
  const int per_request =
      (static_cast<int>(prompt.size()) + kTokens + kBlockSize - 1) / kBlockSize;
  std::printf("session blocks %d, %d independent requests %d\n", used,
              kBranches, kBranches * per_request);
  EXPECT_EQ(used, (entries + kBlockSize - 1) / kBlockSize);
  EXPECT_LT(used, kBranches * per_request);
  engine_->Cancel(*h);
  ASSERT_TRUE(sink->WaitFor(Kind::kClosed, 1));
  EXPECT_TRUE(absl::IsCancelled(sink->events().back().status));
  ExpectAllFree();
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

}  // namespace
}  // namespace braid::batching
