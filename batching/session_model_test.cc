// Sessions on the real model ($BRAID_MODEL) through the engine and
// ModelExecutor (docs/MULTISTREAM.md, "What proves it"): one stream equals
// Generate, branches equal independent requests, late input equals
// recomputing the context, chunking does not change a bit, stop strings and
// the context bound. Keep and resume: session_keep_test.
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batching/testing/session_model_fixture.h"

namespace braid::batching {
namespace {

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
    if (temp > 0) {
      EXPECT_GT(distinct.size(), 1u);
    }
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
      if (k == 3) {
        ASSERT_TRUE(ref.Forward(late, false, &logits).ok());
      }
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
  const std::vector<SessionEvent> events = sink->events();  // a copy
  for (const SessionEvent& e : events) {
    if (e.kind == Kind::kTokens || e.kind == Kind::kTurnEnd) text += e.text;
  }
  const SessionEvent* end = Find(events, Kind::kTurnEnd);
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

}  // namespace
}  // namespace braid::batching
