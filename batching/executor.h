// Runs a StepPlan: one forward pass over every scheduled sequence, then
// sampling for the sequences that asked for a token.
//
// Implementations: ModelExecutor (batching/model_executor.h, the Llama model
// over the paged KV pool) and testing::FakeExecutor (scripted logits). Owned
// by the engine's creator; called only from the engine thread.
#ifndef BRAID_BATCHING_EXECUTOR_H_
#define BRAID_BATCHING_EXECUTOR_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "batching/sampler.h"
#include "batching/step_plan.h"

namespace braid::batching {

class Executor {
 public:
  virtual ~Executor() = default;

  // `samplers[i]` belongs to plan.sequences[i]'s request (never null where
  // `sample` is set). On error nothing was sampled; the engine fails the
  // step's requests.
  virtual absl::StatusOr<StepOutput> Execute(
      const StepPlan& plan, absl::Span<Sampler* const> samplers) = 0;

  // Size of one logits row.
  virtual int vocab_size() const = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_EXECUTOR_H_
