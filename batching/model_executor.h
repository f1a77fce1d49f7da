// The Executor for any model::Model (model/model.h): turns a StepPlan into
// one model::Batch, runs Model::Forward over the model's KV cache, and
// samples each sequence that asked for a token from its logits row. When
// every sampler of the step can do with a reduction of its row
// (Sampler::RowNeeds: its k largest entries, penalized first, with a draw
// or a nucleus denominator), the step runs Model::ForwardTop instead and
// only those leave the model (a nucleus only from a model that reduces on
// its device; should it reach past its row's entries, the step runs again
// for whole rows); and when the engine
// expects the next step to be this one a token further and every sampler
// takes its row's top-1, it tells the model that step in advance
// (Model::SetLookahead).
//
// Owns the KV cache (made by the model, sized at construction); the
// Scheduler's BlockManager decides which blocks each sequence uses. Engine
// thread only; not thread-safe. The model must outlive it.
#ifndef BRAID_BATCHING_MODEL_EXECUTOR_H_
#define BRAID_BATCHING_MODEL_EXECUTOR_H_

#include <memory>
#include <optional>
#include <vector>

#include "batching/executor.h"
#include "model/batch.h"
#include "model/model.h"

namespace braid::batching {

class ModelExecutor : public Executor {
 public:
  ModelExecutor(model::Model* model, int block_size, int num_blocks);

  absl::StatusOr<StepOutput> Execute(const StepPlan& plan) override;
  int vocab_size() const override { return model_->info().n_vocab; }

  const model::KvCache& kv_cache() const { return *kv_; }
  // Tokens drawn from whole rows after a reduction (a nucleus past its
  // reduced row), and the steps run again for them.
  int64_t whole_row_samples() const { return whole_row_samples_; }
  int64_t whole_row_reruns() const { return whole_row_reruns_; }

 private:
  std::optional<model::TopRequest> TopNeeded(
      const StepPlan& plan, int n_vocab,
      const std::vector<std::vector<int>>& sample_rows, int n_rows);
  // The lookahead of `plan` (model::Model::SetLookahead) into ahead_, when
  // it has one: every sequence one token taking its row's top-1, with room
  // for the next entry in its blocks.
  bool BuildAhead(const StepPlan& plan);
  void AddSequence(const ScheduledSequence& s, std::vector<int>* sample_rows,
                   int* rows);
  // Sample from row `row` of logits_.
  void SampleWholeRow(Sampler* sampler, int64_t row, SampledToken* out);

  model::Model* const model_;
  const std::unique_ptr<model::KvCache> kv_;
  model::Batch batch_;              // reused between steps
  std::vector<float> logits_;       // [n_rows, n_vocab]
  model::TopLogits top_;            // the rows reduced (Model::ForwardTop)
  model::Batch ahead_;              // the lookahead step
  std::vector<float> row_scratch_;  // [n_vocab]
  int64_t whole_row_samples_ = 0, whole_row_reruns_ = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_MODEL_EXECUTOR_H_
