// Sessions kept between turns on the real model ($BRAID_MODEL): the second
// turn computes only its new tokens, a kept session resumes as if never
// closed (also after its blocks were evicted), idle sessions are kept and
// clients limited (docs/MULTISTREAM.md).
#include <memory>
#include <string>
#include <vector>

#include "batching/testing/session_model_fixture.h"

namespace braid::batching {
namespace {

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
  auto sink = KeptAfterFirstTurn(o, user, turn1);
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
  auto h = engine_->ResumeSession(
      "client", "s1", resumed, [&](const SessionOptions& r) {
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
  KeptAfterFirstTurn(o, user, turn1);
  // Every block of the pool: prompt 318 + 2 output tokens.
  std::vector<int32_t> prompt;
  while (prompt.size() < 318) {
    for (int32_t t : Encode(kUser)) prompt.push_back(t);
  }
  prompt.resize(318);
  EXPECT_EQ(Generate(prompt, 2).size(), 2u);
  auto resumed = std::make_shared<RecordingSessionSink>();
  auto h =
      engine_->ResumeSession("", "s2", resumed, [](const SessionOptions&) {});
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
