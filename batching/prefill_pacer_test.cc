#include "batching/prefill_pacer.h"

#include "gtest/gtest.h"

namespace braid::batching {
namespace {

// A step model: 10 ms for the decodes, `per_token` for each prefill token.
double StepSeconds(int prefill_tokens, double per_token) {
  return 0.010 + prefill_tokens * per_token;
}

// n steps as the engine runs them: `prefill` tokens beside 4 decode tokens,
// or none when the pacer asks for a probe.
void RunSteps(PrefillPacer& p, int n, int prefill, double per_token) {
  for (int i = 0; i < n; ++i) {
    const int tokens = p.Cap() == PrefillPacer::kProbe ? 0 : prefill;
    p.Observe(4, tokens, StepSeconds(tokens, per_token));
  }
}

TEST(PrefillPacerTest, NoCapUntilTheDecodeStepIsSeen) {
  PrefillPacer p(1.5, 2);
  EXPECT_EQ(p.Cap(), 0);
  p.Observe(4, 8, StepSeconds(8, 0.001));  // no decode-only step seen yet
  EXPECT_EQ(p.Cap(), 0);
  // Prompts keep arriving, no step ever decodes alone: after 15 steps with
  // prefill the pacer asks for a probe to measure the decode step.
  for (int i = 0; i < 14; ++i) p.Observe(4, 8, StepSeconds(8, 0.001));
  EXPECT_EQ(p.Cap(), PrefillPacer::kProbe);
  p.Observe(4, 0, StepSeconds(0, 0.001));
  // No prompt token measured since: one is guessed to cost a decode token's
  // share of the step (10 ms / 4), so 0.5 x 10 ms allows 2.
  EXPECT_EQ(p.Cap(), 2);
  p.Observe(4, 8, StepSeconds(8, 0.001));  // measured: 1 ms a token
  EXPECT_NEAR(p.Cap(), 5, 1);              // 0.5 x 10 ms / 1 ms, rounded down
  // Steps with no decoding say nothing about isolation.
  PrefillPacer q(1.5, 2);
  q.Observe(0, 512, 0.5);
  EXPECT_EQ(q.Cap(), 0);
}

TEST(PrefillPacerTest, CapKeepsTheStepWithinTheSlowdown) {
  // 0.9 ms per prefill token, 10 ms decode step, slowdown 1.5: 5 tokens
  // (5.6 would exceed it).
  PrefillPacer p(1.5, 2);
  p.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(p, 20, 8, 0.0009);
  EXPECT_EQ(p.Cap(), 5);
  EXPECT_NEAR(p.decode_step_seconds(), 0.010, 1e-12);
  EXPECT_NEAR(p.seconds_per_prefill_token(), 0.0009, 1e-9);
  // Slowdown 2: 11 tokens.
  PrefillPacer q(2.0, 2);
  q.Observe(4, 0, StepSeconds(0, 0));
  q.Observe(4, 3, StepSeconds(3, 0.0009));
  EXPECT_EQ(q.Cap(), 11);
}

// A TPOT objective lets steps run up to it when that is more generous than
// the slowdown: 50 ms against a 10 ms decode step leaves 40 ms, 44 tokens
// at 0.9 ms; an objective under 1.5 x the decode step changes nothing.
TEST(PrefillPacerTest, StepObjectiveWidensTheBudget) {
  PrefillPacer p(1.5, 2, /*step_objective_seconds=*/0.050);
  p.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(p, 20, 8, 0.0009);
  EXPECT_EQ(p.Cap(), 44);
  PrefillPacer q(1.5, 2, /*step_objective_seconds=*/0.012);
  q.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(q, 20, 8, 0.0009);
  EXPECT_EQ(q.Cap(), 5);
}

// The engine sets the objective before each step (the tightest of the
// decoding requests'): the cap follows it at once, and 0 leaves the
// slowdown alone.
TEST(PrefillPacerTest, StepObjectiveCanChangeBetweenSteps) {
  PrefillPacer p(1.5, 2, /*step_objective_seconds=*/0.050);
  p.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(p, 20, 8, 0.0009);
  EXPECT_EQ(p.Cap(), 44);
  p.SetStepObjective(0.030);  // 20 ms over the decode step: 22 tokens
  EXPECT_EQ(p.Cap(), 22);
  p.SetStepObjective(0);
  EXPECT_EQ(p.Cap(), 5);
  p.SetStepObjective(0.100);
  EXPECT_EQ(p.Cap(), 100);
}

// With deadlines, the objective bounds the cap instead of setting it: a
// step takes as many prompt tokens as the waiting prompts need to be on
// time (earliest due first), at least the slowdown's 5 and at most the
// objective's 44 (10 ms decode steps, 0.9 ms a prompt token).
TEST(PrefillPacerTest, DeadlinesTakeOnlyWhatThePromptsNeed) {
  PrefillPacer p(1.5, 2, /*step_objective_seconds=*/0.050);
  p.UseDeadlines(true);
  p.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(p, 12, 8, 0.0009);
  using Due = PrefillPacer::DuePrompt;
  EXPECT_NEAR(p.PrefillSeconds(100), 0.090, 1e-6);
  EXPECT_EQ(p.Cap(), 5);                   // nothing waits
  EXPECT_EQ(p.Cap({Due{10.0, 0.09}}), 5);  // 0.9% of the time: the slowdown's
  // 0.45 s of work in 1 s: p x 0.9 ms / (10 ms + p x 0.9 ms) >= 0.45 from
  // p = 9.1 on.
  EXPECT_EQ(p.Cap({Due{1.0, 0.45}}), 10);
  // Earliest first: 0.09 s due in 0.5 s, then 0.36 s more by 1 s; in any
  // order.
  EXPECT_EQ(p.Cap({Due{1.0, 0.36}, Due{0.5, 0.09}}), 10);
  EXPECT_EQ(p.Cap({Due{0.5, 0.09}, Due{1.0, 0.36}}), 10);
  // 0.2 s due in 0.25 s: 80%, p = 0.8 x 10 / (0.2 x 0.9) = 44.4 -> the
  // objective's 44.
  EXPECT_EQ(p.Cap({Due{0.25, 0.2}}), 44);
  // Late, or more than the machine can do in time: all the objective allows.
  EXPECT_EQ(p.Cap({Due{10.0, 0.09}, Due{-0.1, 0.01}}), 44);
  EXPECT_EQ(p.Cap({Due{1.0, 1.8}}), 44);
  // Without deadlines the objective's budget is taken whatever waits.
  p.UseDeadlines(false);
  EXPECT_EQ(p.Cap({Due{10.0, 0.09}}), 44);
}

// The rest of a prompt, from the line through its mean cost so far and its
// cost now: tokens at 1 ms + 0.01 ms per position.
TEST(PrefillPacerTest, RestOfPromptExtrapolatesTheGrowingCost) {
  PrefillPacer p(1.5, 2);
  p.Observe(4, 0, StepSeconds(0, 0));
  for (int i = 0; i < 40; ++i) p.Observe(4, 10, StepSeconds(10, 0.002));
  ASSERT_NEAR(p.PrefillSeconds(1), 0.002, 1e-9);  // now: at position 100
  // 100 done took 100 x 1 ms + 0.01 ms x 99 x 100 / 2 = 0.1495 s.
  const double rest = p.RestOfPrompt(100, 0.1495, 100);
  // Positions 100..199: 100 x 1 ms + 0.01 ms x (100 + ... + 199).
  EXPECT_NEAR(rest, 0.100 + 0.00001 * 14950, 0.002);
  EXPECT_NEAR(p.RestOfPrompt(0, 0, 100), 0.200, 1e-9);  // none done: flat
  // A cost that fell (noise) is taken as flat, never as negative.
  EXPECT_NEAR(p.RestOfPrompt(100, 0.5, 100), 0.200, 1e-9);
}

// A prompt's tokens get dearer as its context grows: the cap follows within
// a few steps, and never drops below the minimum chunk.
TEST(PrefillPacerTest, FollowsRisingCostDownToTheMinimum) {
  PrefillPacer p(1.5, 2);
  p.Observe(4, 0, StepSeconds(0, 0));
  RunSteps(p, 10, 4, 0.00048);
  EXPECT_EQ(p.Cap(), 10);
  RunSteps(p, 14, 4, 0.002);
  EXPECT_LE(p.Cap(), 3);
  EXPECT_GE(p.Cap(), 2);
  RunSteps(p, 15, 2, 0.05);
  EXPECT_EQ(p.Cap(), 2);
}

// The decode-only step grows while a prompt prefills (the decoders' contexts
// grow): every 15 paced steps one step goes without prefill to re-measure it,
// so that growth is not charged to the prompt.
TEST(PrefillPacerTest, ProbesTheDecodeStepEveryFifteenSteps) {
  PrefillPacer p(1.5, 1);
  p.Observe(4, 0, 0.010);
  int probes = 0;
  double decode = 0.010;
  for (int step = 0; step < 64; ++step) {
    decode += 0.00005;  // the decoders slow down: +3.2 ms over the run
    if (p.Cap() == PrefillPacer::kProbe) {
      ++probes;
      p.Observe(4, 0, decode);
    } else {
      p.Observe(4, 2, decode + 2 * 0.001);
    }
  }
  EXPECT_EQ(probes, 4);
  // The per-token estimate stays near the true 1 ms (charging the drift to
  // the prompt would make it 2.6 ms), the decode step near 13.2 ms.
  EXPECT_LT(p.seconds_per_prefill_token(), 0.0015);
  EXPECT_GT(p.decode_step_seconds(), 0.0125);
}

// The estimates hold for one set of decoders: a step with prefill whose
// decode tokens differ by more than a quarter from the last decode-only
// step's is not charged to the prompt (it asks for a probe), a probe with
// other decoders starts the decode estimate afresh, and Reset forgets all.
TEST(PrefillPacerTest, EstimatesFollowTheDecodersAndReset) {
  PrefillPacer p(1.5, 1);
  p.Observe(4, 0, 0.010);
  p.Observe(4, 5, 0.015);  // 1 ms a prompt token
  EXPECT_EQ(p.Cap(), 5);
  // 12 decoders now: the step is slower, but not because of the prompt.
  p.Observe(12, 5, 0.030);
  EXPECT_NEAR(p.seconds_per_prefill_token(), 0.001, 1e-9);
  EXPECT_EQ(p.Cap(), PrefillPacer::kProbe);
  p.Observe(12, 0, 0.020);  // the probe: a fresh decode estimate
  EXPECT_NEAR(p.decode_step_seconds(), 0.020, 1e-12);
  EXPECT_EQ(p.Cap(), 10);
  p.Reset();
  EXPECT_EQ(p.Cap(), 0);
  EXPECT_EQ(p.decode_step_seconds(), 0);
}

// One slow decode-only step (a preempted thread) moves the estimate up by
// at most 10%, so it does not loosen the cap of the steps that follow; a
// faster one is taken as it comes, and steady growth is followed.
TEST(PrefillPacerTest, DecodeEstimateRisesSlowlyAndFallsAtOnce) {
  PrefillPacer p(1.5, 1);
  p.Observe(4, 0, 0.010);
  RunSteps(p, 15, 5, 0.001);  // 15 paced steps, then a probe is due
  ASSERT_EQ(p.Cap(), PrefillPacer::kProbe);
  p.Observe(4, 0, 0.020);  // twice as slow: noise
  EXPECT_LE(p.decode_step_seconds(), 0.011 + 1e-12);
  RunSteps(p, 15, 5, 0.001);
  ASSERT_EQ(p.Cap(), PrefillPacer::kProbe);
  p.Observe(4, 0, 0.008);
  EXPECT_LT(p.decode_step_seconds(), 0.009);
  for (int i = 0; i < 40; ++i) p.Observe(4, 0, 0.012);  // real growth
  EXPECT_NEAR(p.decode_step_seconds(), 0.012, 1e-4);
}

TEST(PrefillPacerTest, OffBelowOrAtOne) {
  PrefillPacer p(1.0, 2);
  p.Observe(4, 0, 0.01);
  p.Observe(4, 8, 0.02);
  EXPECT_EQ(p.Cap(), 0);
}

}  // namespace
}  // namespace braid::batching
