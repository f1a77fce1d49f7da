// Runs a StepPlan: one forward pass over every scheduled sequence, then a
// token for each of its sample points (each with its own sampler).
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

  // Every sample point's `sampler` is set. On error nothing was sampled;
  // the engine fails the step's requests.
  virtual absl::StatusOr<StepOutput> Execute(const StepPlan& plan) = 0;

  // Size of one logits row.
  virtual int vocab_size() const = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_EXECUTOR_H_
