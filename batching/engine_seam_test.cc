// The model seam (model/model.h) end to end: the engine, the scheduler and
// ModelExecutor run a model implementation of their own
// (testing::ToyModel: no weights, its own KV cache) with no change above
// the seam, and every request's tokens are the model's answer on its own
// context, alone, batched with others, sharing cached prefix blocks and
// preempted under a small cache.
#include <memory>
#include <vector>

#include "batching/engine.h"
#include "batching/model_executor.h"
#include "batching/testing/engine_runs.h"
#include "batching/testing/fifo_queue.h"
#include "batching/testing/tokenizer.h"
#include "batching/testing/toy_model.h"
#include "gtest/gtest.h"

namespace braid::batching {
namespace {

constexpr int kBlockSize = 8;

struct Rig {
  std::unique_ptr<testing::ToyModel> model;
  std::unique_ptr<ModelExecutor> executor;
  std::unique_ptr<Engine> engine;
};

Rig MakeRig(const model::Tokenizer* tokenizer, int num_blocks,
            int lookahead_slots = 0) {
  EngineOptions o;
  o.scheduler.lookahead_slots = lookahead_slots;
  o.scheduler.num_blocks = num_blocks;
  o.scheduler.block_size = kBlockSize;
  o.scheduler.max_batch_tokens = 64;
  o.scheduler.max_num_seqs = 8;
  o.max_context_tokens = 512;
  Rig rig;
  rig.model = std::make_unique<testing::ToyModel>(tokenizer->vocab_size());
  rig.executor =
      std::make_unique<ModelExecutor>(rig.model.get(), kBlockSize, num_blocks);
  rig.engine = std::make_unique<Engine>(rig.executor.get(), tokenizer, o,
                                        testing::FifoQueues());
  return rig;
}

// Eight prompts of 20-35 tokens, the even ones sharing a 16-token (two
// block) prefix.
std::vector<GenerationRequest> Requests(int max_tokens) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest r;
    for (int j = 0; j < 20 + 2 * i; ++j) {
      r.prompt.push_back(i % 2 == 0 && j < 16 ? 300 + j : 1000 + 37 * i + j);
    }
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.arrival = absl::Now();
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<int32_t> Expected(const GenerationRequest& r, int n_vocab) {
  std::vector<int32_t> context = r.prompt, out;
  for (int i = 0; i < r.max_tokens; ++i) {
    out.push_back(testing::ToyModel::Next(context, n_vocab));
    context.push_back(out.back());
  }
  return out;
}

// The tokens of `r` sampled by Sample over the toy model's whole rows.
std::vector<int32_t> ExpectedSampled(const GenerationRequest& r, int n_vocab) {
  Sampler sampler(r.sampling, r.prompt);
  std::vector<int32_t> context = r.prompt, out;
  std::vector<float> row(n_vocab);
  for (int i = 0; i < r.max_tokens; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    row[testing::ToyModel::Next(context, n_vocab)] = 1.0f;
    out.push_back(sampler.Sample(absl::MakeSpan(row)).token_id);
    context.push_back(out.back());
  }
  return out;
}

using testing::ExpectEngineIdle;
using testing::RunTogether;

TEST(EngineSeamTest, ASecondModelImplementationServesThroughTheEngine) {
  std::unique_ptr<model::Tokenizer> tokenizer = testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int n_vocab = tokenizer->vocab_size();
  const std::vector<GenerationRequest> requests = Requests(24);
  Rig big = MakeRig(tokenizer.get(), 128);
  const std::vector<std::vector<int32_t>> alone =
      RunTogether(*big.engine, {requests[0]});
  EXPECT_EQ(alone[0], Expected(requests[0], n_vocab));
  const std::vector<std::vector<int32_t>> together =
      RunTogether(*big.engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i], Expected(requests[i], n_vocab)) << "request " << i;
  }
  EXPECT_GT(big.engine->Stats().prefix_hit_tokens, 0);
  EXPECT_EQ(big.engine->Stats().preemptions, 0);
  ExpectEngineIdle(*big.engine);
  EXPECT_EQ(big.executor->kv_cache().num_blocks(), 128);

  // Eight requests of up to 59 tokens (8 blocks) in 16 blocks.
  Rig small = MakeRig(tokenizer.get(), 16);
  const std::vector<std::vector<int32_t>> squeezed =
      RunTogether(*small.engine, requests);
  EXPECT_GT(small.engine->Stats().preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(squeezed[i], Expected(requests[i], n_vocab)) << "request " << i;
  }
  ExpectEngineIdle(*small.engine);
}

// Greedy requests leave the model as each row's largest entry
// (Model::ForwardTop), penalized ones too (the model penalizes the rows
// first: TopRequest::penalties); a step with a request that reports
// log-probabilities of the raw row and chooses from the penalized one gets
// whole rows; the tokens are the same every way.
TEST(EngineSeamTest, StepsReduceTheirRowsUnlessASamplerNeedsThemWhole) {
  std::unique_ptr<model::Tokenizer> tokenizer = testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int n_vocab = tokenizer->vocab_size();
  std::vector<GenerationRequest> requests = Requests(12);
  Rig rig = MakeRig(tokenizer.get(), 128);
  const std::vector<std::vector<int32_t>> greedy =
      RunTogether(*rig.engine, requests);
  EXPECT_GT(rig.model->top_steps(), 0);
  // (Prefill chunks that sample nothing run whole.)
  const int whole_before = rig.model->steps() - rig.model->top_steps();
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(greedy[i], Expected(requests[i], n_vocab)) << "request " << i;
  }
  // A repetition penalty on one-hot logits (1 stays the largest, 0 stays 0)
  // changes no token.
  for (GenerationRequest& r : requests) r.sampling.repetition_penalty = 1.5f;
  int top_before = rig.model->top_steps();
  const std::vector<std::vector<int32_t>> penalized =
      RunTogether(*rig.engine, requests);
  EXPECT_GT(rig.model->top_steps(), top_before);
  EXPECT_EQ(rig.model->steps() - rig.model->top_steps(), whole_before);
  EXPECT_EQ(penalized, greedy);
  for (GenerationRequest& r : requests) r.sampling.logprobs = true;
  top_before = rig.model->top_steps();
  const std::vector<std::vector<int32_t>> whole =
      RunTogether(*rig.engine, requests);
  EXPECT_EQ(rig.model->top_steps(), top_before);
  EXPECT_GT(rig.model->steps() - rig.model->top_steps(), whole_before);
  EXPECT_EQ(whole, greedy);
  ExpectEngineIdle(*rig.engine);
}

// Decode steps with nothing waiting tell the model the next step in
// advance; the toy model runs it at once (as a device would while the host
// works) and answers the next step from it when it matches, also when
// requests that finished drop out of it. Tokens are the model's own answers
// either way: a lookahead step that is not used writes only entries no one
// reads before they are written again.
TEST(EngineSeamTest, LookaheadStepsAnswerTheStepsThatMatchThem) {
  std::unique_ptr<model::Tokenizer> tokenizer = testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int n_vocab = tokenizer->vocab_size();
  std::vector<GenerationRequest> requests = Requests(0);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].max_tokens = 10 + 3 * static_cast<int>(i);
  }
  Rig rig = MakeRig(tokenizer.get(), 128, /*lookahead_slots=*/1);
  const std::vector<std::vector<int32_t>> got =
      RunTogether(*rig.engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i], Expected(requests[i], n_vocab)) << "request " << i;
  }
  // All decode steps but the first after the prompts (29 of 30 here).
  EXPECT_GE(rig.model->lookahead_hits(), 25);
  ExpectEngineIdle(*rig.engine);
}

// Temperature sampling without top-k draws over each whole row where the
// row is (TopRequest::draws: the model gets the rows' u's, the host only
// the drawn ids); equal seeds give equal tokens. (sampler_test shows the
// draws equal Sample's over the whole row.)
TEST(EngineSeamTest, TemperatureDrawsHappenWhereTheRowsAre) {
  std::unique_ptr<model::Tokenizer> tokenizer = testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::vector<GenerationRequest> requests = Requests(12);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].sampling.temperature = 1.0f;
    requests[i].sampling.seed = 100 + i;
  }
  Rig first = MakeRig(tokenizer.get(), 128);
  const std::vector<std::vector<int32_t>> a =
      RunTogether(*first.engine, requests);
  EXPECT_GT(first.model->draw_steps(), 0);
  Rig second = MakeRig(tokenizer.get(), 128);
  const std::vector<std::vector<int32_t>> b =
      RunTogether(*second.engine, requests);
  EXPECT_EQ(a, b);
  ExpectEngineIdle(*first.engine);
}

// From a model that reduces on its device, a nucleus is drawn on the host
// from its row's largest entries and the row's softmax denominator
// (TopRequest::draws with u < 0); one that reaches past them (top-p 0.9
// over the toy model's nearly flat rows) has the step run again for whole
// rows. A model that reduces on the host gives whole rows for a nucleus.
// Either way the tokens are Sample's over whole rows.
class NucleusTest : public ::testing::TestWithParam<bool> {};

TEST_P(NucleusTest, NucleiComeFromReducedRowsOrWholeRows) {
  const bool on_device = GetParam();
  std::unique_ptr<model::Tokenizer> tokenizer = testing::LoadTestTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int n_vocab = tokenizer->vocab_size();
  std::vector<GenerationRequest> requests = Requests(12);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].sampling.temperature = 1.0f;
    requests[i].sampling.seed = 200 + i;
    if (i % 2 == 0) {
      requests[i].sampling.min_p = 0.5f;  // the largest entry alone
    } else {
      requests[i].sampling.top_p = 0.9f;  // most of the vocabulary
    }
  }
  Rig rig = MakeRig(tokenizer.get(), 128);
  rig.model->set_reduces_on_device(on_device);
  const std::vector<std::vector<int32_t>> got =
      RunTogether(*rig.engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i], ExpectedSampled(requests[i], n_vocab)) << "request " << i;
  }
  if (on_device) {
    EXPECT_GT(rig.model->draw_steps(), 0);
    EXPECT_GT(rig.executor->whole_row_samples(), 0);
    EXPECT_GT(rig.executor->whole_row_reruns(), 0);
  } else {
    EXPECT_EQ(rig.model->draw_steps(), 0);
    EXPECT_EQ(rig.executor->whole_row_samples(), 0);
  }
  std::vector<GenerationRequest> min_p;
  for (size_t i = 0; i < requests.size(); i += 2) min_p.push_back(requests[i]);
  const int64_t whole = rig.executor->whole_row_samples();
  const int top_before = rig.model->top_steps();
  const std::vector<std::vector<int32_t>> reduced =
      RunTogether(*rig.engine, min_p);
  for (size_t i = 0; i < min_p.size(); ++i) {
    EXPECT_EQ(reduced[i], got[2 * i]) << "request " << 2 * i;
  }
  EXPECT_EQ(rig.executor->whole_row_samples(), whole);
  if (on_device) {
    EXPECT_GT(rig.model->top_steps(), top_before);
  } else {
    EXPECT_EQ(rig.model->top_steps(), top_before);
  }
  ExpectEngineIdle(*rig.engine);
}

INSTANTIATE_TEST_SUITE_P(HostOrDevice, NucleusTest, ::testing::Bool());

}  // namespace
}  // namespace braid::batching
