#include "batching/sampler.h"

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace braid::batching {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, 0.5f, 2.9f}; }

int SampleOnce(const SamplingOptions& o, std::vector<int32_t> prompt = {}) {
  Sampler s(o, prompt);
  std::vector<float> l = Logits();
  return s.Sample(absl::MakeSpan(l)).token_id;
}

TEST(SamplerTest, GreedyPicksArgmax) {
  EXPECT_EQ(SampleOnce(SamplingOptions{}), 1);
}

TEST(SamplerTest, RepetitionPenaltyDemotesPromptTokens) {
  SamplingOptions o;
  o.repetition_penalty = 2.0f;
  EXPECT_EQ(SampleOnce(o, {1}), 4);  // 3/2 = 1.5 < 2.9
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesUseOutputCounts) {
  SamplingOptions o;
  o.frequency_penalty = 0.1f;
  o.presence_penalty = 0.05f;
  Sampler s(o, {});
  std::vector<float> l = Logits();
  EXPECT_EQ(s.Sample(absl::MakeSpan(l)).token_id, 1);  // counts: {1: 1}
  l = Logits();
  EXPECT_EQ(s.Sample(absl::MakeSpan(l)).token_id, 4);  // 3 - .15 < 2.9
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingOptions o;
  o.temperature = 1.5f;
  o.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    o.seed = seed;
    EXPECT_EQ(SampleOnce(o), 1);
  }
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  SamplingOptions o;
  o.temperature = 1.0f;
  o.min_p = 0.5f;  // keeps p >= p(1)/2: token 4 (e^-0.1) stays, 2 (e^-1) goes
  std::map<int, int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    o.seed = seed;
    ++seen[SampleOnce(o)];
  }
  for (const auto& [t, n] : seen) EXPECT_TRUE(t == 1 || t == 4) << t;
  EXPECT_EQ(seen.size(), 2u);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedsDiffer) {
  SamplingOptions o;
  o.temperature = 1.0f;
  std::vector<int> a, b, c;
  for (int run = 0; run < 3; ++run) {
    o.seed = run < 2 ? 42 : 7;
    Sampler s(o, {});
    for (int i = 0; i < 50; ++i) {
      std::vector<float> l = Logits();
      (run == 0   ? a
       : run == 1 ? b
                  : c)
          .push_back(s.Sample(absl::MakeSpan(l)).token_id);
    }
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SamplerTest, TopPKeepsSmallestNucleus) {
  SamplingOptions o;
  o.temperature = 1.0f;
  o.top_p = 0.3f;  // p(1) ~ 0.36 alone exceeds it
  for (uint64_t seed = 0; seed < 50; ++seed) {
    o.seed = seed;
    EXPECT_EQ(SampleOnce(o), 1);
  }
}

TEST(SamplerTest, LogprobsFromRawLogits) {
  SamplingOptions o;
  o.logprobs = true;
  o.top_logprobs = 2;
  Sampler s(o, {});
  std::vector<float> l = Logits();
  SampledToken t = s.Sample(absl::MakeSpan(l));
  double z = 0;
  for (float x : Logits()) z += std::exp(x);
  EXPECT_NEAR(t.logprob, 3.0 - std::log(z), 1e-5);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].token_id, 1);
  EXPECT_EQ(t.top[1].token_id, 4);
  EXPECT_NEAR(t.top[1].logprob, 2.9 - std::log(z), 1e-5);
}

// Sampling from a shared row (parallel streams): the row stays as it is,
// the scratch is touched only when penalties change logits, and every
// token, logprob and draw equals sampling from a private copy.
TEST(SamplerTest, SharedRowStaysAndSamplesAsACopy) {
  std::vector<SamplingOptions> cases(4);
  cases[1].repetition_penalty = 2.0f;
  cases[2].temperature = 0.8f;
  cases[2].seed = 7;
  cases[3].frequency_penalty = 0.1f;
  cases[3].presence_penalty = 0.05f;
  cases[3].temperature = 1.2f;
  for (SamplingOptions& o : cases) {
    o.logprobs = true;
    o.top_logprobs = 2;
    Sampler copied(o, {1}), shared(o, {1});
    const std::vector<float> row = Logits();
    std::vector<float> scratch;
    for (int step = 0; step < 6; ++step) {
      std::vector<float> copy = row;
      const SampledToken a = copied.Sample(absl::MakeSpan(copy));
      const SampledToken b = shared.Sample(absl::MakeConstSpan(row), &scratch);
      ASSERT_EQ(row, Logits());
      ASSERT_EQ(a.token_id, b.token_id) << step;
      ASSERT_EQ(a.logprob, b.logprob) << step;
      ASSERT_EQ(a.top.size(), b.top.size()) << step;
    }
    const bool penalties = o.repetition_penalty != 1.0f ||
                           o.frequency_penalty != 0.0f ||
                           o.presence_penalty != 0.0f;
    EXPECT_EQ(scratch.empty(), !penalties);
  }
}

TEST(SamplerTest, RowNeedsTheTopKUnlessTheWholeRowMatters) {
  auto needs = [](SamplingOptions o) { return Sampler(o, {}).RowNeeds(1000); };
  SamplingOptions o;
  ASSERT_TRUE(needs(o).has_value());
  EXPECT_EQ(needs(o)->k, 1);
  EXPECT_FALSE(needs(o)->log_z);
  o.logprobs = true;
  o.top_logprobs = 5;
  EXPECT_EQ(needs(o)->k, 5);
  EXPECT_TRUE(needs(o)->log_z);
  EXPECT_TRUE(needs(o)->draws.empty());
  o.temperature = 0.8f;  // a draw over the whole row, where the row is
  ASSERT_EQ(needs(o)->draws.size(), 1u);
  EXPECT_FLOAT_EQ(needs(o)->draws[0].inv_temperature, 1.0f / 0.8f);
  EXPECT_EQ(needs(o)->k, 5);
  EXPECT_GE(needs(o)->draws[0].u, 0.0);
  o.top_p = 0.9f;  // a nucleus: the largest entries and the denominator
  ASSERT_TRUE(needs(o).has_value());
  EXPECT_EQ(needs(o)->k, 1000);
  ASSERT_EQ(needs(o)->draws.size(), 1u);
  EXPECT_LT(needs(o)->draws[0].u, 0.0);
  EXPECT_FLOAT_EQ(needs(o)->draws[0].inv_temperature, 1.0f / 0.8f);
  EXPECT_EQ(Sampler(o, {}).RowNeeds(1 << 17)->k, model::kMaxTopLogits);
  o.top_k = 40;
  o.min_p = 0.05f;
  EXPECT_EQ(needs(o)->k, 40);
  EXPECT_TRUE(needs(o)->draws.empty());
  o.top_k = 1000;  // keeps everything: a nucleus again
  EXPECT_EQ(needs(o)->k, 1000);
  EXPECT_LT(needs(o)->draws[0].u, 0.0);
  o.top_k = 40;
  o.presence_penalty = 0.5f;  // the raw row's logprobs, the penalized row's
  EXPECT_FALSE(needs(o).has_value());  // choice
  o.logprobs = false;
  o.top_logprobs = 0;
  o.repetition_penalty = 1.3f;  // the row penalized first, then reduced
  ASSERT_TRUE(needs(o).has_value());
  EXPECT_EQ(needs(o)->k, 40);
  ASSERT_EQ(needs(o)->penalties.size(), 1u);
  const std::vector<int32_t> prompt = {7, 7, 9};
  Sampler penalized(o, prompt);
  penalized.Accept(9);
  penalized.Accept(12);
  penalized.Accept(12);
  const model::RowPenalties p = penalized.RowNeeds(1000)->penalties[0];
  EXPECT_FLOAT_EQ(p.repetition, 1.3f);
  EXPECT_FLOAT_EQ(p.presence, 0.5f);
  std::map<int32_t, int32_t> counts;
  for (size_t i = 0; i < p.ids.size(); ++i)
    counts[p.ids[i]] = p.output_counts[i];
  EXPECT_EQ(counts, (std::map<int32_t, int32_t>{{7, 0}, {9, 1}, {12, 2}}));
  SamplingOptions wide;
  wide.logprobs = true;
  wide.top_logprobs = model::kMaxTopLogits + 1;
  EXPECT_FALSE(Sampler(wide, {}).RowNeeds(1 << 17).has_value());
}

// SampleTop over a row reduced as RowNeeds asks gives Sample's tokens and
// log-probabilities, draw after draw with the same seed.
TEST(SamplerTest, SampleTopEqualsSampleOverTheWholeRow) {
  constexpr int kVocab = 3000;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<SamplingOptions> cases(13);
  cases[4].temperature = 0.9f;  // drawn over the whole row
  cases[4].seed = 9;
  cases[5] = cases[4];
  cases[5].logprobs = true;
  cases[5].top_logprobs = 4;
  cases[1].logprobs = true;
  cases[1].top_logprobs = 3;
  cases[2].temperature = 0.7f;
  cases[2].top_k = 50;
  cases[2].seed = 5;
  cases[3] = cases[2];
  cases[3].top_p = 0.8f;
  cases[3].min_p = 0.02f;
  cases[3].logprobs = true;
  cases[3].top_logprobs = 60;
  // Penalties, over a prompt and the tokens sampled so far.
  cases[6].repetition_penalty = 1.5f;  // greedy
  cases[7] = cases[4];                 // drawn over the whole row
  cases[7].frequency_penalty = 0.75f;
  cases[7].presence_penalty = -0.25f;
  cases[8] = cases[2];  // top-k
  cases[8].repetition_penalty = 0.8f;
  cases[8].frequency_penalty = 0.5f;
  // Nuclei, from the row's kMaxTopLogits largest entries.
  cases[9] = cases[4];
  cases[9].top_p = 0.8f;
  cases[10] = cases[4];
  cases[10].min_p = 0.05f;
  cases[11] = cases[5];  // with log-probabilities
  cases[11].top_p = 0.95f;
  cases[11].min_p = 0.01f;
  cases[12] = cases[9];  // penalized
  cases[12].repetition_penalty = 1.2f;
  cases[12].presence_penalty = 0.4f;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back((i * 37) % 400);
  for (const SamplingOptions& o : cases) {
    Sampler whole(o, prompt), top(o, prompt);
    for (int step = 0; step < 40; ++step) {
      std::vector<float> row(kVocab);
      for (float& v : row) v = std::round(normal(rng) * 8) / 8;  // with ties
      // The likeliest tokens are the penalized ones.
      for (int i = 0; i < 400; i += 3) row[i] += 6.0f;
      model::TopRequest req = *top.RowNeeds(kVocab);
      if (!req.draws.empty() && req.draws[0].u >= 0) {
        req.draws[0].u = top.NextUniform();
      }
      model::TopLogits reduced;
      model::ReduceLogits(row.data(), 1, kVocab, req, &reduced);
      const SampledToken a = whole.Sample(absl::MakeSpan(row));
      const std::optional<SampledToken> reduced_b =
          top.SampleTop(RowOf(reduced, 0));
      ASSERT_TRUE(reduced_b.has_value()) << "step " << step;
      const SampledToken& b = *reduced_b;
      ASSERT_EQ(a.token_id, b.token_id) << "step " << step;
      EXPECT_EQ(a.logprob, b.logprob);
      ASSERT_EQ(a.top.size(), b.top.size());
      for (size_t i = 0; i < a.top.size(); ++i) {
        EXPECT_EQ(a.top[i].token_id, b.top[i].token_id);
        EXPECT_EQ(a.top[i].logprob, b.top[i].logprob);
      }
    }
  }
}

// A nucleus that reaches past the row's largest entries (a flat row, top-p
// near 1) cannot be drawn from them: SampleTop says so and changes nothing,
// so the whole row then gives Sample's token.
TEST(SamplerTest, ANucleusPastTheReducedRowNeedsTheWholeRow) {
  constexpr int kVocab = 5000;
  SamplingOptions o;
  o.temperature = 1.0f;
  o.top_p = 0.99f;
  o.seed = 3;
  Sampler whole(o, {}), top(o, {});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> flat(-0.1f, 0.1f);
  for (int step = 0; step < 10; ++step) {
    std::vector<float> row(kVocab);
    for (float& v : row) v = flat(rng);
    const model::TopRequest req = *top.RowNeeds(kVocab);
    model::TopLogits reduced;
    model::ReduceLogits(row.data(), 1, kVocab, req, &reduced);
    EXPECT_FALSE(top.SampleTop(RowOf(reduced, 0)).has_value());
    const SampledToken a = whole.Sample(absl::MakeSpan(row));
    EXPECT_EQ(top.Sample(absl::MakeSpan(row)).token_id, a.token_id);
  }
}

}  // namespace
}  // namespace braid::batching
