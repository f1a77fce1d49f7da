// Sessions and the reasoning stream on the engine with a fake executor
// (scripted logits, no model), event by event: what a turn that ends in
// the middle of a character releases and where, thinking opened by input,
// penalties counted as Generate's, a Generate request ending in thought,
// and the duplex policies. The real model's session tests are
// session_model_test.cc and multistream_session_test.cc.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batching/engine.h"
#include "batching/testing/engine_fixture.h"
#include "batching/testing/fake_executor.h"
#include "batching/testing/recording_sink.h"
#include "batching/testing/session_sink.h"
#include "gtest/gtest.h"
#include "metrics/engine_metrics.h"
#include "metrics/testing.h"
#include "prometheus/registry.h"

namespace braid::batching {
namespace {

using testing::FakeExecutor;
using testing::RecordingSink;

class EngineSessionTest : public testing::FakeEngineTest {};

// A session turn that ends in the middle of a character (here after the
// first byte of a three-byte one) releases what it held back at its end:
// after the stream's last token (the turn end's first_position, the next
// position), of that token's kind (output, or reasoning when the turn ends
// while the model thinks).
TEST_F(EngineSessionTest, SessionTurnEndReleasesHeldBytesAfterTheLastToken) {
  const std::optional<int32_t> word = tokenizer_->FindToken("Hello");
  ASSERT_TRUE(word.has_value());
  const int vocab = tokenizer_->vocab_size();
  const int32_t lead = LeadByteToken();
  constexpr int32_t kThink = 1005, kInputEnd = 1004;
  for (const bool thinking : {false, true}) {
    SCOPED_TRACE(thinking ? "thinking" : "output");
    // After the input the thinking marker (or the word), after the marker
    // the word, after the word the lead byte.
    FakeExecutor executor(
        vocab, 4,
        [&](const std::vector<int32_t>& context, std::vector<float>* logits) {
          std::fill(logits->begin(), logits->end(), 0.0f);
          const int32_t last = context.back();
          (*logits)[last == *word                   ? lead
                    : last == kInputEnd && thinking ? kThink
                                                    : *word] = 1.0f;
        });
    EngineOptions options = Options();
    options.reasoning.think_start_id = kThink;
    options.reasoning.think_end_id = kThink + 1;
    auto engine = MakeEngine(&executor, options);
    SessionOptions o = OneOutputSession(thinking ? 3 : 2);
    auto sink = std::make_shared<testing::RecordingSessionSink>();
    auto h = engine->OpenSession(o, sink);
    ASSERT_TRUE(h.ok()) << h.status();
    engine->SessionAppend(*h, {"in1", 1, {1003, kInputEnd}, {2}});
    ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 1));
    std::vector<int32_t> want = {*word, lead};
    if (thinking) want.insert(want.begin(), kThink);
    EXPECT_EQ(sink->Tokens(2), want);
    int64_t next = -1;
    for (const SessionEvent& e : sink->events()) {
      if (e.kind == SessionEvent::Kind::kTokens) {
        next = e.first_position + static_cast<int64_t>(e.tokens.size());
        EXPECT_EQ(e.reasoning, thinking);
      }
      if (e.kind != SessionEvent::Kind::kTurnEnd) continue;
      EXPECT_EQ(e.finish_reason, FinishReason::kLength);
      EXPECT_EQ(e.text, "\xEF\xBF\xBD");  // U+FFFD: the partial character
      // Prefix 3 and input 2 entries, then the tokens.
      EXPECT_EQ(e.first_position, 5 + static_cast<int64_t>(want.size()));
      EXPECT_EQ(e.first_position, next);
      EXPECT_EQ(e.reasoning, thinking);
    }
    engine->CloseSession(*h);
    ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
    ExpectIdle(*engine);
  }
}

// Input may open thinking, as a prompt does for Generate (a chat template
// that ends the assistant's header with the start marker): the turn after
// it is reasoning until the budget forces the end marker, token for token
// as Generate over the same context. A turn's usage counts its own
// reasoning tokens.
TEST_F(EngineSessionTest, SessionInputOpensThinkingLikeAGeneratePrompt) {
  constexpr int32_t kThink = 1005, kWord = 2000;
  constexpr int kBudget = 2, kTokens = 6;
  FakeExecutor executor(tokenizer_->vocab_size(), 4, Constant({kWord}, {1}));
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options);
  const std::vector<int32_t> prefix = OneOutputSession(kTokens).prefix,
                             input = {1003, kThink};
  // Generate over prefix + input.
  GenerationRequest r = Request(0, kTokens);
  r.prompt = prefix;
  r.prompt.insert(r.prompt.end(), input.begin(), input.end());
  r.reasoning.budget = kBudget;
  auto gsink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(r, gsink).ok());
  const OutputChunk final = gsink->WaitFinal();
  std::vector<int32_t> tokens;
  std::vector<bool> reasoning;
  for (const OutputChunk& c : gsink->Chunks()) {
    for (int32_t t : c.token_ids) {
      tokens.push_back(t);
      reasoning.push_back(c.reasoning);
    }
  }
  ASSERT_EQ(tokens, (std::vector<int32_t>{kWord, kWord, kThink + 1, kWord,
                                          kWord, kWord}));
  EXPECT_EQ(final.reasoning_tokens, kBudget + 1);

  SessionOptions o = OneOutputSession(kTokens);
  o.streams[1].reasoning.budget = kBudget;
  auto sink = std::make_shared<testing::RecordingSessionSink>();
  auto h = engine->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine->SessionAppend(*h, {"in1", 1, input, {2}});
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 1));
  // A second turn after input without the marker: output only.
  engine->SessionAppend(*h, {"in2", 1, {1003}, {2}});
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 2));
  std::vector<int32_t> session_tokens;
  std::vector<bool> session_reasoning;
  std::vector<int> turn_reasoning;
  for (const SessionEvent& e : sink->events()) {
    if (e.kind == SessionEvent::Kind::kTurnEnd) {
      turn_reasoning.push_back(e.reasoning_tokens);
    }
    if (e.kind != SessionEvent::Kind::kTokens) continue;
    for (const SampledToken& t : e.tokens) {
      session_tokens.push_back(t.token_id);
      session_reasoning.push_back(e.reasoning);
    }
  }
  ASSERT_EQ(session_tokens.size(), 2u * kTokens);
  EXPECT_EQ(std::vector<int32_t>(session_tokens.begin(),
                                 session_tokens.begin() + kTokens),
            tokens);
  EXPECT_EQ(std::vector<bool>(session_reasoning.begin(),
                              session_reasoning.begin() + kTokens),
            reasoning);
  EXPECT_EQ(std::vector<bool>(session_reasoning.begin() + kTokens,
                              session_reasoning.end()),
            std::vector<bool>(kTokens, false));
  EXPECT_EQ(turn_reasoning, (std::vector<int>{kBudget + 1, 0}));
  engine->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
  ExpectIdle(*engine);
}

// A session turn's penalties count its context as a Generate request over
// the same context counts its prompt: repetition over everything the
// stream sees (the appended input here), frequency and presence over the
// turn's own tokens only (not the earlier turns').
TEST_F(EngineSessionTest, SessionPenaltiesCountTheContextAsGenerateDoes) {
  constexpr int32_t kA = 2000, kB = 2001, kC = 2002;
  FakeExecutor executor(tokenizer_->vocab_size(), 4,
                        Constant({kA, kB, kC}, {1.0f, 0.9f, 0.8f}));
  auto engine = MakeEngine(&executor, Options());
  const std::vector<int32_t> prefix = OneOutputSession(1).prefix;
  auto generate = [&](std::vector<int32_t> prompt, const SamplingOptions& s,
                      int max_tokens) {
    GenerationRequest r = Request(0, max_tokens);
    r.prompt = std::move(prompt);
    r.sampling = s;
    auto sink = std::make_shared<RecordingSink>();
    EXPECT_TRUE(engine->Submit(r, sink).ok());
    EXPECT_TRUE(sink->WaitFinal().final);
    return sink->Tokens();
  };
  auto session = [&](const SamplingOptions& s, int max_tokens,
                     const std::vector<std::vector<int32_t>>& inputs) {
    SessionOptions o = OneOutputSession(max_tokens, s);
    auto sink = std::make_shared<testing::RecordingSessionSink>();
    auto h = engine->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    std::vector<std::vector<int32_t>> turns;
    for (size_t i = 0; i < inputs.size(); ++i) {
      engine->SessionAppend(*h, {absl::StrCat("in", i), 1, inputs[i], {2}});
      EXPECT_TRUE(
          sink->WaitFor(SessionEvent::Kind::kTurnEnd, static_cast<int>(i) + 1));
      const std::vector<int32_t> all = sink->Tokens(2);
      turns.emplace_back(all.begin() + static_cast<int64_t>(i) * max_tokens,
                         all.end());
    }
    engine->CloseSession(*h);
    EXPECT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
    return turns;
  };
  // Repetition: A is in the input, so B wins.
  SamplingOptions repetition;
  repetition.repetition_penalty = 2.0f;
  const std::vector<int32_t> input = {1003, kA};
  std::vector<int32_t> prompt = prefix;
  prompt.insert(prompt.end(), input.begin(), input.end());
  EXPECT_EQ(generate(prompt, repetition, 1), std::vector<int32_t>{kB});
  EXPECT_EQ(session(repetition, 1, {input}),
            (std::vector<std::vector<int32_t>>{{kB}}));
  // Presence: each turn starts afresh, A then B then C, as Generate over
  // the whole history does.
  SamplingOptions presence;
  presence.presence_penalty = 0.25f;
  const std::vector<std::vector<int32_t>> turns =
      session(presence, 3, {{1003}, {1004}});
  EXPECT_EQ(turns,
            (std::vector<std::vector<int32_t>>{{kA, kB, kC}, {kA, kB, kC}}));
  prompt = prefix;
  for (int32_t t : {1003, kA, kB, kC, 1004}) prompt.push_back(t);
  EXPECT_EQ(generate(prompt, presence, 3), turns[1]);
  ExpectIdle(*engine);
}

// A Generate request that ends while the model thinks, in the middle of a
// character, sends the reasoning stream's held-back bytes as reasoning text
// before its final chunk (not at all when reasoning is hidden).
TEST_F(EngineSessionTest, GenerateEndingInThoughtReleasesTheReasoningText) {
  const int vocab = tokenizer_->vocab_size();
  const int32_t lead = LeadByteToken();
  constexpr int32_t kThink = 1005;
  FakeExecutor executor(vocab, 4, Constant({lead}, {1}));
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options);
  for (const bool hide : {false, true}) {
    SCOPED_TRACE(hide ? "hidden" : "shown");
    GenerationRequest r = Request(0, 1);
    r.prompt = {1000, 1001, kThink};  // opens thinking
    r.reasoning.hide = hide;
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(engine->Submit(r, sink).ok());
    const OutputChunk final = sink->WaitFinal();
    EXPECT_EQ(final.reasoning_tokens, 1);
    std::string reasoning_text;
    for (const OutputChunk& c : sink->Chunks()) {
      if (c.reasoning) reasoning_text += c.text;
      if (c.final) {
        EXPECT_EQ(c.text, "");
      }
    }
    EXPECT_EQ(reasoning_text, hide ? "" : "\xEF\xBF\xBD");
  }
  ExpectIdle(*engine);
}

// A session that thinks decodes on the reasoning queue, and on the I/O
// queue again once the end marker closes the thought (MULTISTREAM.md's
// queues), as a Generate request does.
TEST_F(EngineSessionTest, ThinkingSessionDecodesOnTheReasoningQueue) {
  constexpr int32_t kThink = 1005, kWord = 2000;
  FakeExecutor executor(tokenizer_->vocab_size(), 4, Constant({kWord}, {1}));
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options);
  SessionOptions o = OneOutputSession(5);
  o.streams[1].reasoning.budget = 2;
  auto sink = std::make_shared<testing::RecordingSessionSink>();
  // The input goes in with the open (the executor held, so both are applied
  // before the first step): the prefix and the input are one prompt chunk
  // whatever the machine's speed.
  executor.Hold();
  auto blocker = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(2, 2, 3000), blocker).ok());
  while (engine->Stats().step_started == absl::InfinitePast()) {
    absl::SleepFor(absl::Microseconds(100));
  }
  auto h = engine->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  engine->SessionAppend(*h, {"in1", 1, {1003, kThink}, {2}});
  executor.Release();
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 1));
  engine->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
  ASSERT_TRUE(blocker->WaitFinal().final);
  EXPECT_EQ(sink->Tokens(2),
            (std::vector<int32_t>{kWord, kWord, kThink + 1, kWord, kWord}));
  // The queue of each step that sampled the session's next token.
  std::vector<QueueKind> queues;
  for (const StepPlan& p : executor.Plans()) {
    for (const ScheduledSequence& seq : p.sequences) {
      if (seq.request_id == *h && !seq.samples.empty()) {
        queues.push_back(seq.queue);
      }
    }
  }
  EXPECT_EQ(queues,
            (std::vector<QueueKind>{QueueKind::kPrompt, QueueKind::kReasoning,
                                    QueueKind::kReasoning, QueueKind::kIo,
                                    QueueKind::kIo}));
  ExpectIdle(*engine);
}

// Close and cancel free a writing session within one engine step
// (MULTISTREAM.md): a Generate request keeps the engine stepping; the
// session, closed (or cancelled) while the events of step S are delivered,
// is in no plan after S, and the stats after step S + 1 show no session and
// only the request's blocks taken.
TEST_F(EngineSessionTest, CloseAndCancelFreeTheSessionWithinOneStep) {
  for (const bool cancel : {false, true}) {
    SCOPED_TRACE(cancel ? "cancel" : "close");
    FakeExecutor executor(tokenizer_->vocab_size(), 4);
    auto engine = MakeEngine(&executor, Options());
    Engine* e = engine.get();
    auto request = std::make_shared<RecordingSink>();
    uint64_t session = 0;
    int step_now = -1, closed_at = -1, last_planned = -1, checked_at = -1;
    EngineStats after;
    int tokens = 0;
    auto sink = std::make_shared<testing::RecordingSessionSink>(
        [&](const SessionEvent& ev) {  // on the engine thread, after step_now
          if (ev.kind == SessionEvent::Kind::kTokens && ++tokens == 3) {
            closed_at = step_now;
            if (cancel) {
              e->Cancel(session);
            } else {
              e->CloseSession(session);
            }
          }
        });
    executor.SetHook([&](int step, const StepPlan& plan) {
      step_now = step;
      for (const ScheduledSequence& seq : plan.sequences) {
        if (seq.request_id == session) last_planned = step;
      }
      if (closed_at >= 0 && checked_at < 0 && step >= closed_at + 2) {
        checked_at = step;
        after = e->Stats();  // as of the end of step closed_at + 1 at least
      }
    });
    executor.Hold();
    auto h = engine->OpenSession(OneOutputSession(100), sink);
    ASSERT_TRUE(h.ok()) << h.status();
    session = *h;
    engine->SessionAppend(session, {"in1", 1, {1003}, {2}});
    ASSERT_TRUE(engine->Submit(Request(6, 40), request).ok());
    executor.Release();
    ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
    request->WaitFinal();
    ASSERT_GE(closed_at, 0);
    EXPECT_EQ(last_planned, closed_at);
    ASSERT_GE(checked_at, 0);
    EXPECT_EQ(after.sessions, 0);
    // The request (6 + up to 40 tokens, 4 a block) holds at most 12.
    EXPECT_GE(after.kv_blocks_free, after.kv_blocks_total - 12);
    ExpectIdle(*engine);
  }
}

// Sessions count in the token counters as requests do: the prefix and each
// input as prompt tokens, each turn's output and reasoning (hidden reasoning
// too) at its end; and in the inter-token latency of their queue.
TEST_F(EngineSessionTest, SessionTokensCountInTheMetrics) {
  prometheus::Registry registry;
  metrics::EngineMetrics engine_metrics(registry);
  constexpr int32_t kThink = 1005, kWord = 2000;
  FakeExecutor executor(tokenizer_->vocab_size(), 4, Constant({kWord}, {1}));
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options, &engine_metrics);
  SessionOptions o = OneOutputSession(4);  // prefix of 3
  o.streams[1].reasoning.budget = 1;
  o.streams[1].reasoning.hide = true;
  auto sink = std::make_shared<testing::RecordingSessionSink>();
  auto h = engine->OpenSession(o, sink);
  ASSERT_TRUE(h.ok()) << h.status();
  // Turn 1 thinks (1 token, then the forced end marker), turn 2 does not.
  engine->SessionAppend(*h, {"in1", 1, {1003, kThink}, {2}});
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 1));
  engine->SessionAppend(*h, {"in2", 1, {1004, 1005, 1006}, {2}});
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, 2));
  engine->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
  ExpectIdle(*engine);
  using metrics::testing::Value;
  EXPECT_EQ(Value(registry, "braid_prompt_tokens_total"), 3 + 2 + 3);
  EXPECT_EQ(Value(registry, "braid_output_tokens_total"), 4 + 4);
  EXPECT_EQ(Value(registry, "braid_reasoning_tokens_total"), 2);
  // Inter-token gaps within each turn (the hidden reasoning sends nothing):
  // turn 1's output tokens 3 and 4, turn 2's four tokens.
  EXPECT_EQ(
      Value(registry, "braid_inter_token_latency_seconds", {{"queue", "io"}}),
      1 + 3);
}

// The duplex policies of a single-stream model (docs/MULTISTREAM.md), with
// input arriving while the output writes (after its 2nd token): interject
// places it and the turn goes on; interrupt ends the turn (CANCELLED) and
// answers the input in a new one; queue ingests it when the turn ends. An
// explicit interrupt ends the turn; input queued behind it then goes in.
class SessionDuplexTest : public EngineSessionTest {
 protected:
  static constexpr int kTokens = 4;
  static constexpr int32_t kWord = 2000;

  struct Run {
    std::vector<SessionEvent> events;
    // Per step that computed the session's entries: how many, and the
    // queue that granted them.
    std::vector<std::pair<size_t, QueueKind>> steps;
    std::string Trace() const {  // e.g. "A T T A E T T T T E"
      std::string out;
      for (const SessionEvent& e : events) {
        switch (e.kind) {
          case SessionEvent::Kind::kAck:
            out += "A";
            break;
          case SessionEvent::Kind::kTokens:
            out += "T";
            break;
          case SessionEvent::Kind::kTurnEnd:
            out += "E";
            break;
          default:
            continue;
        }
        out += " ";
      }
      if (!out.empty()) out.pop_back();
      return out;
    }
    std::vector<const SessionEvent*> Of(SessionEvent::Kind kind) const {
      std::vector<const SessionEvent*> out;
      for (const SessionEvent& e : events) {
        if (e.kind == kind) out.push_back(&e);
      }
      return out;
    }
  };

  // Opens a session with `policy`, appends input 1 (starting the output),
  // calls act(engine, handle) once the output wrote two tokens, and waits
  // for `turn_ends` turn ends.
  Run Start(DuplexPolicy policy, int turn_ends,
            const std::function<void(Engine&, uint64_t)>& act) {
    FakeExecutor executor(tokenizer_->vocab_size(), 4, Constant({kWord}, {1}));
    auto engine = MakeEngine(&executor, Options());
    SessionOptions o = OneOutputSession(kTokens);
    o.duplex = policy;
    uint64_t handle = 0;
    int tokens = 0;
    Engine* e = engine.get();
    auto sink = std::make_shared<testing::RecordingSessionSink>(
        [&](const SessionEvent& ev) {  // on the engine thread
          if (ev.kind == SessionEvent::Kind::kTokens && ++tokens == 2) {
            act(*e, handle);
          }
        });
    auto h = engine->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    handle = *h;
    engine->SessionAppend(handle, {"in1", 1, {1003}, {2}});
    EXPECT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, turn_ends,
                              absl::Seconds(10)));
    // Nothing more comes.
    engine->CloseSession(handle);
    EXPECT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
    ExpectIdle(*engine);
    Run run{sink->events(), {}};
    for (const StepPlan& p : executor.Plans()) {
      for (const ScheduledSequence& seq : p.sequences) {
        if (seq.request_id == handle) {
          run.steps.push_back({seq.tokens.size(), seq.queue});
        }
      }
    }
    // Every token follows the last input placed before it.
    int64_t next = -1;
    for (const SessionEvent& ev : run.events) {
      if (ev.kind == SessionEvent::Kind::kAck) next = ev.end_position;
      if (ev.kind != SessionEvent::Kind::kTokens) continue;
      EXPECT_EQ(ev.first_position, next) << run.Trace();
      next = ev.first_position + 1;
    }
    return run;
  }

  static void AppendInput2(Engine& engine, uint64_t handle) {
    engine.SessionAppend(handle, {"in2", 1, {1004, 1005}, {2}});
  }
};

TEST_F(SessionDuplexTest, InterjectPlacesTheInputAndGoesOn) {
  // Input 2 of 10 tokens: more than a decode step's entries, so only its
  // arriving mid-turn makes it I/O work (the turn's own input is prompt
  // work).
  const Run run = Start(DuplexPolicy::kInterject, 1, [](Engine& e, uint64_t h) {
    e.SessionAppend(h, {"in2", 1, std::vector<int32_t>(10, 1004), {2}});
  });
  EXPECT_EQ(run.Trace(), "A T T A T T E");
  EXPECT_EQ(run.Of(SessionEvent::Kind::kTurnEnd)[0]->finish_reason,
            FinishReason::kLength);
  bool saw_input2 = false;
  for (const auto& [tokens, queue] : run.steps) {
    if (tokens < 10) continue;
    saw_input2 = true;
    EXPECT_EQ(queue, QueueKind::kIo);
  }
  EXPECT_TRUE(saw_input2);
}

TEST_F(SessionDuplexTest, InterruptEndsTheTurnAndAnswers) {
  const Run run = Start(DuplexPolicy::kInterrupt, 2, AppendInput2);
  EXPECT_EQ(run.Trace(), "A T T E A T T T T E");
  const auto ends = run.Of(SessionEvent::Kind::kTurnEnd);
  EXPECT_EQ(ends[0]->finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(ends[0]->output_tokens, 2);
  EXPECT_EQ(ends[1]->finish_reason, FinishReason::kLength);
}

TEST_F(SessionDuplexTest, QueueIngestsAfterTheTurn) {
  const Run run = Start(DuplexPolicy::kQueue, 2, AppendInput2);
  EXPECT_EQ(run.Trace(), "A T T T T E A T T T T E");
}

TEST_F(SessionDuplexTest, InterruptThenQueuedInputGoesIn) {
  const Run run = Start(DuplexPolicy::kQueue, 2, [](Engine& e, uint64_t h) {
    AppendInput2(e, h);
    e.SessionInterrupt(h, 2);
  });
  EXPECT_EQ(run.Trace(), "A T T E A T T T T E");
  EXPECT_EQ(run.Of(SessionEvent::Kind::kTurnEnd)[0]->finish_reason,
            FinishReason::kCancelled);
}

// Input to an open, idle session wakes the engine at once, as a new request
// does: 20 one-token turns, each appended 5 ms after the last one ended (a
// client that pauses, so the engine is waiting when input comes), take about
// as long as 20 one-token Generate requests made the same way in the same
// run, not 20 times the engine's 50 ms idle wait.
TEST_F(EngineSessionTest, InputToAnIdleSessionIsAppliedAtOnce) {
  constexpr int kTurns = 20;
  constexpr absl::Duration kPause = absl::Milliseconds(5);
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options());
  // An open session keeps the engine in its step loop during both runs.
  auto sink = std::make_shared<testing::RecordingSessionSink>();
  auto h = engine->OpenSession(OneOutputSession(1), sink);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kOpened, 1));
  absl::Time start = absl::Now();
  for (int i = 0; i < kTurns; ++i) {
    absl::SleepFor(kPause);
    auto request = std::make_shared<RecordingSink>();
    ASSERT_TRUE(engine->Submit(Request(2, 1), request).ok());
    ASSERT_TRUE(request->WaitFinal().final);
  }
  const absl::Duration generate = absl::Now() - start;
  start = absl::Now();
  for (int i = 0; i < kTurns; ++i) {
    absl::SleepFor(kPause);
    engine->SessionAppend(*h, {absl::StrCat("in", i), 1, {1003}, {2}});
    ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd, i + 1));
  }
  const absl::Duration session = absl::Now() - start;
  EXPECT_LT(session, 2 * generate + absl::Milliseconds(300))
      << "session turns " << session << ", Generate requests " << generate;
  engine->CloseSession(*h);
  ASSERT_TRUE(sink->WaitFor(SessionEvent::Kind::kClosed, 1));
  ExpectIdle(*engine);
}

}  // namespace
}  // namespace braid::batching
