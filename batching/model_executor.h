// The Executor for a Llama-family model on the CPU kernels: turns a
// StepPlan into one model::Batch, runs LlamaModel::Forward over the paged
// KV pool, and samples each sequence that asked for a token from its logits
// row.
//
// Owns the KV pool (model::PagedKvPool, sized at construction); the
// Scheduler's BlockManager decides which blocks each sequence uses. Engine
// thread only; not thread-safe. The model must outlive it.
#ifndef BRAID_BATCHING_MODEL_EXECUTOR_H_
#define BRAID_BATCHING_MODEL_EXECUTOR_H_

#include <vector>

#include "batching/executor.h"
#include "model/batch.h"
#include "model/llama.h"
#include "model/paged_kv.h"

namespace braid::batching {

class ModelExecutor : public Executor {
 public:
  ModelExecutor(model::LlamaModel* model, int block_size, int num_blocks);

  absl::StatusOr<StepOutput> Execute(
      const StepPlan& plan, absl::Span<Sampler* const> samplers) override;
  int vocab_size() const override { return model_->config().n_vocab; }

  const model::PagedKvPool& pool() const { return pool_; }

 private:
  void AddSession(const ScheduledSequence& s, std::vector<int>* sample_rows,
                  int* rows);

  model::LlamaModel* const model_;
  model::PagedKvPool pool_;
  model::Batch batch_;              // reused between steps
  std::vector<float> logits_;       // [n_rows, n_vocab]
  std::vector<float> row_scratch_;  // [n_vocab]
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_MODEL_EXECUTOR_H_
