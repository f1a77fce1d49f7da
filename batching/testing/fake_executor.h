// An Executor with no model: each sampled sequence gets a logits row from a
// script, so engine tests run in microseconds and know every token.
//
// It keeps a fake KV pool (the token id of every entry, by block and slot)
// and writes each step's tokens where the block tables say, so a sequence's
// context is read back through its block table: a wrong table or a shared
// block with the wrong content changes the output, as with the real model.
// The script maps that context -> logits; the default makes token
// (sum of the context) % vocab the argmax, so greedy output depends on every
// entry. A session's sample point gets the script's row for the entries up
// to it (all of them: the fake has no visibility rule). Records every plan
// it ran.
// Engine thread only; Plans() may be read once the engine is idle.
#ifndef BRAID_BATCHING_TESTING_FAKE_EXECUTOR_H_
#define BRAID_BATCHING_TESTING_FAKE_EXECUTOR_H_

#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "batching/executor.h"

namespace braid::batching::testing {

class FakeExecutor : public Executor {
 public:
  // Fills `logits` [vocab] for the request whose context (every token fed
  // so far, including this step's) is `context`.
  using Script = std::function<void(const std::vector<int32_t>& context,
                                    std::vector<float>* logits)>;

  FakeExecutor(int vocab_size, int block_size, Script script = nullptr);

  absl::StatusOr<StepOutput> Execute(const StepPlan& plan) override;
  int vocab_size() const override { return vocab_size_; }

  // Makes the next Execute fail with `status` (once).
  void FailNextStep(absl::Status status);
  // While held, Execute waits (the engine thread blocks inside a step, so
  // submissions pile up in the inbox and join the next step together).
  void Hold();
  void Release();
  // Called inside every Execute with the step number (from 0) and its plan;
  // on the engine thread, so it may call Engine::Cancel.
  using Hook = std::function<void(int step, const StepPlan& plan)>;
  void SetHook(Hook hook);
  std::vector<StepPlan> Plans() const;
  // Total tokens fed by all plans.
  int64_t num_tokens() const;

 private:
  const int vocab_size_;
  const int block_size_;
  Script script_;
  mutable absl::Mutex mu_;
  std::vector<StepPlan> plans_ ABSL_GUARDED_BY(mu_);
  absl::Status next_error_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  Hook hook_ ABSL_GUARDED_BY(mu_);
  // The fake KV pool: block -> token id per slot.
  absl::flat_hash_map<int32_t, std::vector<int32_t>> kv_;
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_FAKE_EXECUTOR_H_
