// The engine with a fake executor (scripted logits, no model): request
// lifecycle, cancellation in every phase, admission control, preemption and
// prefix reuse. The real model's tests are in engine_model_test.cc.
#include "batching/engine.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "batching/testing/fake_executor.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/recording_sink.h"
#include "batching/testing/session_sink.h"
#include "batching/testing/tokenizer.h"
#include "gtest/gtest.h"
#include "metrics/engine_metrics.h"
#include "metrics/testing.h"
#include "prometheus/registry.h"

namespace braid::batching {
namespace {

using testing::FakeExecutor;
using testing::RecordingSink;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = testing::LoadTestTokenizer().release();
  }

  void SetUp() override { ASSERT_NE(tokenizer_, nullptr); }

  static EngineOptions Options(int num_blocks = 256) {
    EngineOptions o;
    o.scheduler.num_blocks = num_blocks;
    o.scheduler.block_size = 4;
    o.scheduler.max_batch_tokens = 16;
    o.scheduler.max_num_seqs = 8;
    return o;
  }

  // Prompt of `n` tokens starting at `first`.
  static GenerationRequest Request(int n, int max_tokens, int32_t first = 1000,
                                   int priority = 0) {
    GenerationRequest r;
    for (int i = 0; i < n; ++i) r.prompt.push_back(first + i);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.priority = priority;
    r.arrival = absl::Now();
    return r;
  }

  std::unique_ptr<Engine> MakeEngine(
      FakeExecutor* executor, const EngineOptions& options,
      metrics::EngineMetrics* engine_metrics = nullptr) {
    return std::make_unique<Engine>(executor, tokenizer_, options,
                                    testing::FifoQueues(), engine_metrics);
  }

  static void ExpectIdle(const Engine& engine) {
    EngineStats s = engine.Stats();
    EXPECT_EQ(s.requests, 0);
    EXPECT_EQ(s.waiting, 0);
    EXPECT_EQ(s.waiting_tokens, 0);
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
};

TEST_F(EngineTest, GeneratesAndReleasesEverything) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options());
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(10, 6), sink).ok());
  OutputChunk last = sink->WaitFinal();
  ASSERT_TRUE(last.final);
  EXPECT_EQ(last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(last.output_tokens, 6);
  EXPECT_EQ(sink->Tokens().size(), 6u);
  ExpectIdle(*engine);
  EXPECT_EQ(engine->Stats().completed, 1);
  // 10 prompt tokens and 5 fed-back outputs (the 6th is never fed).
  EXPECT_EQ(engine->Stats().computed_tokens, 15);
}

// Outputs depend only on each request's own context: many requests batched
// together produce what each produces alone.
TEST_F(EngineTest, BatchedOutputsEqualSoloOutputs) {
  std::vector<std::vector<int32_t>> solo;
  for (int i = 0; i < 6; ++i) {
    FakeExecutor executor(tokenizer_->vocab_size(), 4);
    auto engine = MakeEngine(&executor, Options());
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(engine->Submit(Request(5 + 3 * i, 12, 100 * i), sink).ok());
    sink->WaitFinal();
    solo.push_back(sink->Tokens());
  }
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  executor.Hold();
  auto engine = MakeEngine(&executor, Options());
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 6; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine->Submit(Request(5 + 3 * i, 12, 100 * i), sinks[i]).ok());
  }
  executor.Release();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(sinks[i]->WaitFinal().final);
    EXPECT_EQ(sinks[i]->Tokens(), solo[i]) << "request " << i;
  }
  int max_batch = 0;
  for (const StepPlan& p : executor.Plans()) {
    max_batch = std::max<int>(max_batch, p.sequences.size());
  }
  EXPECT_GE(max_batch, 4);  // they really ran together
  ExpectIdle(*engine);
}

// A pool too small for the load: requests are preempted and recomputed, and
// every output equals the one from a large pool.
TEST_F(EngineTest, PreemptionKeepsOutputsIdentical) {
  auto run = [&](int num_blocks, int64_t* preemptions) {
    FakeExecutor executor(tokenizer_->vocab_size(), 4);
    executor.Hold();
    auto engine = MakeEngine(&executor, Options(num_blocks));
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (int i = 0; i < 8; ++i) {
      sinks.push_back(std::make_shared<RecordingSink>());
      GenerationRequest r = Request(6 + i, 20, 50 * i, /*priority=*/i % 3);
      r.sampling.temperature = 0.9f;  // the RNG state survives preemption
      r.sampling.seed = 1 + i;
      EXPECT_TRUE(engine->Submit(std::move(r), sinks[i]).ok());
    }
    executor.Release();
    std::vector<std::vector<int32_t>> out;
    for (auto& s : sinks) {
      EXPECT_EQ(s->WaitFinal().finish_reason, FinishReason::kLength);
      out.push_back(s->Tokens());
    }
    *preemptions = engine->Stats().preemptions;
    ExpectIdle(*engine);
    return out;
  };
  int64_t big_preemptions = 0, small_preemptions = 0;
  auto big = run(256, &big_preemptions);
  auto small = run(16, &small_preemptions);  // 64 tokens for 8 x ~30
  EXPECT_EQ(big_preemptions, 0);
  EXPECT_GT(small_preemptions, 0);
  EXPECT_EQ(small, big);
}

TEST_F(EngineTest, SharedPrefixIsComputedOnce) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options());
  auto first = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(41, 1), first).ok());
  first->WaitFinal();
  EXPECT_EQ(engine->Stats().computed_tokens, 41);
  GenerationRequest second = Request(41, 1);
  second.prompt.push_back(7);
  second.prompt.push_back(8);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(std::move(second), sink).ok());
  sink->WaitFinal();
  // 40 tokens (10 full blocks) came from the cache; 3 were computed.
  EXPECT_EQ(engine->Stats().prefix_hit_tokens, 40);
  EXPECT_EQ(engine->Stats().computed_tokens, 41 + 3);
}

// Cancel lands in each phase: queued (the pool is full), prefilling (between
// chunks), decoding, and preempted (waiting to be recomputed).
TEST_F(EngineTest, CancelInEveryPhaseFreesEverythingWithinOneStep) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  EngineOptions o = Options(/*num_blocks=*/12);  // 48 tokens
  Engine* engine_ptr = nullptr;
  std::vector<uint64_t> handles(4);
  std::vector<int> cancel_step(4, -1);
  std::vector<int> last_step(4, -1);
  executor.Hold();
  auto engine = MakeEngine(&executor, o);
  engine_ptr = engine.get();
  // 0: decoding long; 1: prefilling a long prompt; 2: queued behind them;
  // 3: high priority, will preempt 1 later.
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 4; ++i)
    sinks.push_back(std::make_shared<RecordingSink>());
  handles[0] = *engine->Submit(Request(4, 30, 100), sinks[0]);
  handles[1] = *engine->Submit(Request(30, 5, 200), sinks[1]);
  handles[2] = *engine->Submit(Request(20, 5, 300), sinks[2]);
  executor.SetHook([&](int step, const StepPlan& plan) {
    for (int i = 0; i < 4; ++i) {
      for (const auto& s : plan.sequences) {
        if (s.request_id == handles[i]) last_step[i] = step;
      }
    }
    if (step == 1) {
      // 1 is mid-prefill, 2 is queued (no room), 0 is decoding.
      engine_ptr->Cancel(handles[1]);
      engine_ptr->Cancel(handles[2]);
      cancel_step[1] = cancel_step[2] = step;
    }
    if (step == 3) engine_ptr->Cancel(handles[0]), cancel_step[0] = step;
  });
  executor.Release();
  for (int i = 0; i < 3; ++i) {
    OutputChunk last = sinks[i]->WaitFinal();
    ASSERT_TRUE(last.final) << i;
    EXPECT_EQ(last.finish_reason, FinishReason::kCancelled) << i;
    // Not scheduled after the step during which it was cancelled.
    EXPECT_LE(last_step[i], cancel_step[i]) << i;
  }
  EXPECT_EQ(last_step[2], -1);  // never started
  EXPECT_GE(last_step[1], 0);   // was prefilling
  ExpectIdle(*engine);

  // Preempted phase: a fills most of the pool, b (higher priority) pushes it
  // out; cancel a while it waits to be recomputed.
  int64_t preempted_at = -1;
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  uint64_t ha = 0;
  executor.SetHook([&](int step, const StepPlan& plan) {
    if (b->Tokens().empty() && !b->done() && step >= 0 &&
        engine_ptr->Stats().requests == 1) {
      // a is running: b arrives (Submit only touches the inbox).
      EXPECT_TRUE(engine_ptr->Submit(Request(20, 8, 500, 5), b).ok());
    }
    for (uint64_t p : plan.preempted) {
      if (p == ha && preempted_at < 0) {
        preempted_at = step;
        engine_ptr->Cancel(ha);
      }
    }
  });
  // Hold the steps until `ha` is set: the hook reads it on the engine
  // thread, and fake steps take microseconds.
  executor.Hold();
  ha = *engine->Submit(Request(20, 24, 400, 0), a);
  executor.Release();
  EXPECT_EQ(a->WaitFinal().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(b->WaitFinal().finish_reason, FinishReason::kLength);
  EXPECT_GE(preempted_at, 0);
  ExpectIdle(*engine);
}

TEST_F(EngineTest, AdmissionControlNamesTheBound) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  executor.Hold();  // nothing starts
  EngineOptions o = Options();
  o.max_waiting_requests = 3;
  o.max_waiting_tokens = 50;
  auto engine = MakeEngine(&executor, o);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  auto submit = [&](int n) {
    sinks.push_back(std::make_shared<RecordingSink>());
    return engine->Submit(Request(n, 2), sinks.back());
  };
  EXPECT_TRUE(submit(5).ok());
  // Once it started (the engine is then blocked inside the step), it no
  // longer counts as waiting.
  while (engine->Stats().waiting > 0) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(submit(20).ok());
  EXPECT_TRUE(submit(20).ok());
  auto tokens = submit(20);
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tokens.status().message().find("--max_waiting_tokens"),
            std::string::npos)
      << tokens.status();
  EXPECT_TRUE(submit(1).ok());
  auto requests = submit(1);
  EXPECT_EQ(requests.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(requests.status().message().find("--max_waiting_requests"),
            std::string::npos)
      << requests.status();
  auto huge = submit(4000);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("pool"), std::string::npos);
  executor.Release();
}

// When the pool runs out, the lower-priority request is the one preempted,
// even though it was admitted first.
TEST_F(EngineTest, LowerPriorityIsPreemptedFirst) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options(/*num_blocks=*/8));
  Engine* engine_ptr = engine.get();
  auto low = std::make_shared<RecordingSink>();
  auto high = std::make_shared<RecordingSink>();
  executor.SetHook([&](int step, const StepPlan&) {
    if (step == 0) {
      EXPECT_TRUE(engine_ptr->Submit(Request(12, 8, 30, 5), high).ok());
    }
  });
  ASSERT_TRUE(engine->Submit(Request(12, 16, 10, -5), low).ok());
  EXPECT_EQ(high->WaitFinal().finish_reason, FinishReason::kLength);
  EXPECT_EQ(low->WaitFinal().finish_reason, FinishReason::kLength);
  EXPECT_GE(engine->Stats().preemptions, 1);
  EXPECT_LT(high->final_push(), low->final_push());
}

TEST_F(EngineTest, FailedStepFailsOnlyItsRequests) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options());
  executor.FailNextStep(absl::InternalError("boom"));
  auto failed = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(4, 3), failed).ok());
  OutputChunk last = failed->WaitFinal();
  EXPECT_EQ(last.error.code(), absl::StatusCode::kInternal);
  auto ok = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(4, 3), ok).ok());
  EXPECT_EQ(ok->WaitFinal().finish_reason, FinishReason::kLength);
  ExpectIdle(*engine);
}

TEST_F(EngineTest, ShutdownCancelsInFlightWork) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto sink = std::make_shared<RecordingSink>();
  {
    auto engine = MakeEngine(&executor, Options());
    ASSERT_TRUE(engine->Submit(Request(4, 200), sink).ok());
  }
  EXPECT_EQ(sink->WaitFinal().finish_reason, FinishReason::kCancelled);
}

// Deadlines travel with the request: one already past is refused at once; a
// running request and a queued one are ended with DEADLINE_EXCEEDED within
// one step of their deadline while the others go on.
TEST_F(EngineTest, DeadlinesEndRequestsInAnyPhase) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  executor.SetHook(
      [](int, const StepPlan&) { absl::SleepFor(absl::Milliseconds(2)); });
  EngineOptions o = Options();
  o.scheduler.max_num_seqs = 1;  // the second request waits in the queue
  auto engine = MakeEngine(&executor, o);

  GenerationRequest late = Request(4, 4);
  late.deadline = absl::Now() - absl::Milliseconds(1);
  EXPECT_EQ(
      engine->Submit(late, std::make_shared<RecordingSink>()).status().code(),
      absl::StatusCode::kDeadlineExceeded);

  GenerationRequest running = Request(4, 500, 100);
  running.deadline = absl::Now() + absl::Milliseconds(300);
  GenerationRequest queued = Request(4, 4, 200);
  queued.deadline = absl::Now() + absl::Milliseconds(100);
  auto running_sink = std::make_shared<RecordingSink>();
  auto queued_sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(running, running_sink).ok());
  ASSERT_TRUE(engine->Submit(queued, queued_sink).ok());

  OutputChunk q = queued_sink->WaitFinal();
  ASSERT_TRUE(q.final);
  EXPECT_EQ(q.error.code(), absl::StatusCode::kDeadlineExceeded) << q.error;
  EXPECT_EQ(q.output_tokens, 0);
  EXPECT_FALSE(running_sink->done());  // the other request goes on
  OutputChunk r = running_sink->WaitFinal();
  ASSERT_TRUE(r.final);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kDeadlineExceeded) << r.error;
  EXPECT_GT(r.output_tokens, 0);
  EXPECT_LT(r.output_tokens, 500);
  // Within a step or two (a step takes 2 ms; the rest of the request would
  // take about 400 ms more).
  EXPECT_LT(running_sink->final_push() - running.deadline,
            absl::Milliseconds(200));
  ExpectIdle(*engine);
  EXPECT_EQ(engine->Stats().failed, 2);
}

TEST_F(EngineTest, RecordsMetrics) {
  prometheus::Registry registry;
  metrics::EngineMetrics engine_metrics(registry, {});
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  EngineOptions o = Options();
  o.max_waiting_tokens = 100;
  auto engine = MakeEngine(&executor, o, &engine_metrics);
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(10, 6), a).ok());
  ASSERT_TRUE(engine->Submit(Request(7, 4, 2000), b).ok());
  EXPECT_EQ(a->WaitFinal().finish_reason, FinishReason::kLength);
  EXPECT_EQ(b->WaitFinal().finish_reason, FinishReason::kLength);
  EXPECT_FALSE(
      engine->Submit(Request(101, 2), std::make_shared<RecordingSink>()).ok());
  ExpectIdle(*engine);

  using metrics::testing::Value;
  EXPECT_EQ(Value(registry, "braid_requests_finished_total",
                  {{"finish_reason", "length"}}),
            2);
  EXPECT_EQ(Value(registry, "braid_prompt_tokens_total"), 17);
  EXPECT_EQ(Value(registry, "braid_output_tokens_total"), 10);
  EXPECT_EQ(Value(registry, "braid_reasoning_tokens_total"), 0);
  // Without thinking markers every decode token is I/O work: 5 + 3 gaps.
  EXPECT_EQ(
      Value(registry, "braid_inter_token_latency_seconds", {{"queue", "io"}}),
      8);
  EXPECT_EQ(Value(registry, "braid_time_to_first_token_seconds"), 2);
  EXPECT_EQ(Value(registry, "braid_time_per_output_token_seconds"), 2);
  EXPECT_EQ(Value(registry, "braid_request_queue_time_seconds"), 2);
  EXPECT_EQ(Value(registry, "braid_engine_step_tokens"),
            static_cast<double>(engine->Stats().steps));
  EXPECT_EQ(Value(registry, "braid_admission_rejections_total",
                  {{"bound", "waiting_tokens"}}),
            1);
}

// A session turn that ends in the middle of a character (here after the
// first byte of a three-byte one) releases what it held back at its end:
// after the stream's last token (the turn end's first_position, the next
// position), of that token's kind (output, or reasoning when the turn ends
// while the model thinks).
TEST_F(EngineTest, SessionTurnEndReleasesHeldBytesAfterTheLastToken) {
  const std::optional<int32_t> word = tokenizer_->FindToken("Hello");
  ASSERT_TRUE(word.has_value());
  const int vocab = tokenizer_->vocab_size();
  int32_t lead = -1;  // the token of byte 0xE2 alone
  for (int32_t id = 0; id < vocab && lead < 0; ++id) {
    if (tokenizer_->TokenBytes(id) == "\xE2") lead = id;
  }
  ASSERT_GE(lead, 0);
  constexpr int32_t kThink = 1005, kInputEnd = 1004;
  for (const bool thinking : {false, true}) {
    SCOPED_TRACE(thinking ? "thinking" : "output");
    // After the input the thinking marker (or the word), after the marker
    // the word, after the word the lead byte.
    FakeExecutor executor(vocab, 4, [&](const std::vector<int32_t>& context,
                                        std::vector<float>* logits) {
      std::fill(logits->begin(), logits->end(), 0.0f);
      const int32_t last = context.back();
      (*logits)[last == *word                          ? lead
                : last == kInputEnd && thinking ? kThink
                                                        : *word] = 1.0f;
    });
    EngineOptions options = Options();
    options.reasoning.think_start_id = kThink;
    options.reasoning.think_end_id = kThink + 1;
    auto engine = MakeEngine(&executor, options);
    SessionOptions o;
    o.prefix = {1000, 1001, 1002};
    SessionStreamOptions out;
    out.name = "out";
    out.output = true;
    out.max_tokens = thinking ? 3 : 2;
    out.ignore_eos = true;
    out.sampling.temperature = 0;
    o.streams = {SessionStreamOptions{.name = "user"}, out};
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
TEST_F(EngineTest, SessionInputOpensThinkingLikeAGeneratePrompt) {
  constexpr int32_t kThink = 1005, kWord = 2000;
  constexpr int kBudget = 2, kTokens = 6;
  FakeExecutor executor(tokenizer_->vocab_size(), 4,
                        [](const std::vector<int32_t>&, std::vector<float>* l) {
                          std::fill(l->begin(), l->end(), 0.0f);
                          (*l)[kWord] = 1.0f;
                        });
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options);
  const std::vector<int32_t> prefix = {1000, 1001, 1002},
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

  SessionOptions o;
  o.prefix = prefix;
  SessionStreamOptions out;
  out.name = "out";
  out.output = true;
  out.max_tokens = kTokens;
  out.ignore_eos = true;
  out.sampling.temperature = 0;
  out.reasoning.budget = kBudget;
  o.streams = {SessionStreamOptions{.name = "user"}, out};
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
TEST_F(EngineTest, SessionPenaltiesCountTheContextAsGenerateDoes) {
  constexpr int32_t kA = 2000, kB = 2001, kC = 2002;
  FakeExecutor executor(tokenizer_->vocab_size(), 4,
                        [](const std::vector<int32_t>&, std::vector<float>* l) {
                          std::fill(l->begin(), l->end(), 0.0f);
                          (*l)[kA] = 1.0f;
                          (*l)[kB] = 0.9f;
                          (*l)[kC] = 0.8f;
                        });
  auto engine = MakeEngine(&executor, Options());
  const std::vector<int32_t> prefix = {1000, 1001, 1002};
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
    SessionOptions o;
    o.prefix = prefix;
    SessionStreamOptions out;
    out.name = "out";
    out.output = true;
    out.max_tokens = max_tokens;
    out.ignore_eos = true;
    out.sampling = s;
    o.streams = {SessionStreamOptions{.name = "user"}, out};
    auto sink = std::make_shared<testing::RecordingSessionSink>();
    auto h = engine->OpenSession(o, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    std::vector<std::vector<int32_t>> turns;
    for (size_t i = 0; i < inputs.size(); ++i) {
      engine->SessionAppend(*h, {absl::StrCat("in", i), 1, inputs[i], {2}});
      EXPECT_TRUE(sink->WaitFor(SessionEvent::Kind::kTurnEnd,
                                static_cast<int>(i) + 1));
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
  EXPECT_EQ(turns, (std::vector<std::vector<int32_t>>{{kA, kB, kC},
                                                      {kA, kB, kC}}));
  prompt = prefix;
  for (int32_t t : {1003, kA, kB, kC, 1004}) prompt.push_back(t);
  EXPECT_EQ(generate(prompt, presence, 3), turns[1]);
  ExpectIdle(*engine);
}

// A Generate request that ends while the model thinks, in the middle of a
// character, sends the reasoning stream's held-back bytes as reasoning text
// before its final chunk (not at all when reasoning is hidden).
TEST_F(EngineTest, GenerateEndingInThoughtReleasesTheReasoningText) {
  const int vocab = tokenizer_->vocab_size();
  int32_t lead = -1;  // the token of byte 0xE2 alone
  for (int32_t id = 0; id < vocab && lead < 0; ++id) {
    if (tokenizer_->TokenBytes(id) == "\xE2") lead = id;
  }
  ASSERT_GE(lead, 0);
  constexpr int32_t kThink = 1005;
  FakeExecutor executor(vocab, 4, [&](const std::vector<int32_t>&,
                                      std::vector<float>* logits) {
    std::fill(logits->begin(), logits->end(), 0.0f);
    (*logits)[lead] = 1.0f;
  });
  EngineOptions options = Options();
  options.reasoning.think_start_id = kThink;
  options.reasoning.think_end_id = kThink + 1;
  auto engine = MakeEngine(&executor, options);
  for (const bool hide : {false, true}) {
    SCOPED_TRACE(hide ? "hidden" : "shown");
    GenerationRequest r = Request(0, 1);
    r.prompt = {1000, 1001, kThink};  // opens thinking
    r.sampling.temperature = 0;
    r.reasoning.hide = hide;
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(engine->Submit(r, sink).ok());
    const OutputChunk final = sink->WaitFinal();
    EXPECT_EQ(final.reasoning_tokens, 1);
    std::string reasoning_text;
    for (const OutputChunk& c : sink->Chunks()) {
      if (c.reasoning) reasoning_text += c.text;
      if (c.final) EXPECT_EQ(c.text, "");
    }
    EXPECT_EQ(reasoning_text, hide ? "" : "\xEF\xBF\xBD");
  }
  ExpectIdle(*engine);
}

// The duplex policies of a single-stream model (docs/MULTISTREAM.md), with
// input arriving while the output writes (after its 2nd token): interject
// places it and the turn goes on; interrupt ends the turn (CANCELLED) and
// answers the input in a new one; queue ingests it when the turn ends. An
// explicit interrupt ends the turn; input queued behind it then goes in.
class SessionDuplexTest : public EngineTest {
 protected:
  static constexpr int kTokens = 4;
  static constexpr int32_t kWord = 2000;

  struct Run {
    std::vector<SessionEvent> events;
    std::string Trace() const {  // e.g. "A T T A E T T T T E"
      std::string out;
      for (const SessionEvent& e : events) {
        switch (e.kind) {
          case SessionEvent::Kind::kAck: out += "A"; break;
          case SessionEvent::Kind::kTokens: out += "T"; break;
          case SessionEvent::Kind::kTurnEnd: out += "E"; break;
          default: continue;
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
    FakeExecutor executor(tokenizer_->vocab_size(), 4,
                          [](const std::vector<int32_t>&, std::vector<float>* l) {
                            std::fill(l->begin(), l->end(), 0.0f);
                            (*l)[kWord] = 1.0f;
                          });
    auto engine = MakeEngine(&executor, Options());
    SessionOptions o;
    o.prefix = {1000, 1001, 1002};
    o.duplex = policy;
    SessionStreamOptions out;
    out.name = "out";
    out.output = true;
    out.max_tokens = kTokens;
    out.ignore_eos = true;
    out.sampling.temperature = 0;
    o.streams = {SessionStreamOptions{.name = "user"}, out};
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
    Run run{sink->events()};
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
  const Run run = Start(DuplexPolicy::kInterject, 1, AppendInput2);
  EXPECT_EQ(run.Trace(), "A T T A T T E");
  EXPECT_EQ(run.Of(SessionEvent::Kind::kTurnEnd)[0]->finish_reason,
            FinishReason::kLength);
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

}  // namespace
}  // namespace braid::batching
