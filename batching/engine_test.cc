// The engine with a fake executor (scripted logits, no model): request
// lifecycle, cancellation in every phase, admission control, preemption and
// prefix reuse. The real model's tests are in engine_model_test.cc.
#include "batching/engine.h"

#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "batching/testing/engine_fixture.h"
#include "batching/testing/fake_executor.h"
#include "batching/testing/recording_sink.h"
#include "gtest/gtest.h"
#include "metrics/engine_metrics.h"
#include "metrics/testing.h"
#include "prometheus/registry.h"

namespace braid::batching {
namespace {

using testing::FakeExecutor;
using testing::RecordingSink;

class EngineTest : public testing::FakeEngineTest {};

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

// A request's output joins the prefix cache like its prompt: a follow-up
// whose prompt is the first one's prompt and output (a chat's next turn)
// computes only what is new.
TEST_F(EngineTest, OutputBlocksAreCachedLikeThePrompt) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, Options());
  auto first = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(Request(30, 16), first).ok());
  first->WaitFinal();
  // 30 prompt tokens and 15 fed-back outputs: 45 entries, 11 full blocks.
  EXPECT_EQ(engine->Stats().computed_tokens, 45);
  GenerationRequest next = Request(30, 1);
  const std::vector<int32_t> out = first->Tokens();
  next.prompt.insert(next.prompt.end(), out.begin(), out.end());
  next.prompt.push_back(9);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(std::move(next), sink).ok());
  sink->WaitFinal();
  EXPECT_EQ(engine->Stats().prefix_hit_tokens, 44);
  EXPECT_EQ(engine->Stats().computed_tokens, 45 + 3);
  ExpectIdle(*engine);
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
  o.scheduler.max_num_seqs = 1;  // once the first starts, no slot is free
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

// The waiting bound counts the requests beyond the free batch slots: a
// burst that free slots will start at the next step is not refused.
TEST_F(EngineTest, RequestsForFreeSlotsDoNotCountAsWaiting) {
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  executor.Hold();  // the first step never ends
  EngineOptions o = Options();
  o.scheduler.max_num_seqs = 4;
  o.max_waiting_requests = 1;
  auto engine = MakeEngine(&executor, o);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  auto submit = [&]() {
    sinks.push_back(std::make_shared<RecordingSink>());
    return engine->Submit(Request(4, 2), sinks.back());
  };
  ASSERT_TRUE(submit().ok());
  while (engine->Stats().waiting > 0) absl::SleepFor(absl::Milliseconds(1));
  // One slot taken, three free: three requests for them and one waiting.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(submit().ok()) << i;
  auto refused = submit();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max_waiting_requests"),
            std::string::npos)
      << refused.status();
  executor.Release();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sinks[i]->WaitFinal().finish_reason, FinishReason::kLength);
  }
  ExpectIdle(*engine);
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

// Each step is paced to the tightest TPOT objective of the requests
// decoding in it (their own or the engine's default), the default when none
// decodes; a request may ask for a looser one than the default too.
TEST_F(EngineTest, StepsKeepTheTightestObjectiveOfTheDecodingRequests) {
  const absl::Duration kDefault = absl::Milliseconds(60);
  EngineOptions options = Options();
  options.tpot_objective = kDefault;
  FakeExecutor executor(tokenizer_->vocab_size(), 4);
  auto engine = MakeEngine(&executor, options);
  Engine* engine_ptr = engine.get();
  absl::flat_hash_map<uint64_t, absl::Duration> asked;
  absl::Mutex mu;
  std::vector<std::pair<absl::Duration, absl::Duration>> steps;  // want, got
  executor.SetHook([&](int, const StepPlan& plan) {
    absl::MutexLock lock(&mu);
    absl::Duration want = absl::InfiniteDuration();
    for (const ScheduledSequence& s : plan.sequences) {
      if (s.queue == QueueKind::kPrompt) continue;
      const absl::Duration own = asked.at(s.request_id);
      want = std::min(want, own > absl::ZeroDuration() ? own : kDefault);
    }
    if (want == absl::InfiniteDuration()) want = kDefault;
    steps.push_back({want, engine_ptr->Stats().step_objective});
  });
  auto run = [&](std::vector<std::pair<int, absl::Duration>> requests) {
    executor.Hold();
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (size_t i = 0; i < requests.size(); ++i) {
      GenerationRequest r = Request(6, requests[i].first, 100 * (i + 1));
      r.tpot_objective = requests[i].second;
      sinks.push_back(std::make_shared<RecordingSink>());
      absl::MutexLock lock(&mu);
      asked[*engine->Submit(std::move(r), sinks.back())] = requests[i].second;
    }
    executor.Release();
    for (auto& s : sinks) ASSERT_TRUE(s->WaitFinal().final);
  };
  // 25 ms decodes beside the default for 6 tokens, then the default alone.
  run({{6, absl::Milliseconds(25)}, {12, absl::ZeroDuration()}});
  // One request that asks for 200 ms.
  run({{6, absl::Milliseconds(200)}});
  absl::MutexLock lock(&mu);
  std::map<absl::Duration, int> seen;
  for (const auto& [want, got] : steps) {
    EXPECT_EQ(got, want);
    ++seen[got];
  }
  EXPECT_GE(seen[absl::Milliseconds(25)], 3);
  EXPECT_GE(seen[kDefault], 3);
  EXPECT_GE(seen[absl::Milliseconds(200)], 3);
  ExpectIdle(*engine);
}

TEST_F(EngineTest, RecordsMetrics) {
  prometheus::Registry registry;
  metrics::EngineMetrics engine_metrics(registry);
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

}  // namespace
}  // namespace braid::batching
