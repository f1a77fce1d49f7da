#include "batching/testing/fake_executor.h"

#include <algorithm>
#include <utility>

namespace braid::batching::testing {

FakeExecutor::FakeExecutor(int vocab_size, int block_size, Script script)
    : vocab_size_(vocab_size),
      block_size_(block_size),
      script_(std::move(script)) {
  if (!script_) {
    script_ = [vocab_size](const std::vector<int32_t>& context,
                           std::vector<float>* logits) {
      int64_t sum = 0;
      for (int32_t t : context) sum += t;
      std::fill(logits->begin(), logits->end(), 0.0f);
      (*logits)[sum % vocab_size] = 10.0f;
    };
  }
}

void FakeExecutor::FailNextStep(absl::Status status) {
  absl::MutexLock lock(&mu_);
  next_error_ = std::move(status);
}

void FakeExecutor::Hold() {
  absl::MutexLock lock(&mu_);
  held_ = true;
}

void FakeExecutor::Release() {
  absl::MutexLock lock(&mu_);
  held_ = false;
}

void FakeExecutor::SetHook(Hook hook) {
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

std::vector<StepPlan> FakeExecutor::Plans() const {
  absl::MutexLock lock(&mu_);
  return plans_;
}

int64_t FakeExecutor::num_tokens() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const StepPlan& p : plans_) n += p.num_tokens;
  return n;
}

absl::StatusOr<StepOutput> FakeExecutor::Execute(const StepPlan& plan) {
  Hook hook;
  int step;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* held) { return !*held; }, &held_));
    step = static_cast<int>(plans_.size());
    plans_.push_back(plan);
    hook = hook_;
  }
  if (hook) hook(step, plan);
  {
    absl::MutexLock lock(&mu_);
    if (!next_error_.ok()) {
      absl::Status s = std::move(next_error_);
      next_error_ = absl::OkStatus();
      return s;
    }
  }
  StepOutput out;
  out.tokens.resize(plan.sequences.size());
  std::vector<float> logits(vocab_size_);
  std::vector<int32_t> context;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& s = plan.sequences[i];
    const int end = s.num_cached + static_cast<int>(s.tokens.size());
    for (int e = s.num_cached; e < end; ++e) {
      std::vector<int32_t>& block = kv_[s.block_table.at(e / block_size_)];
      block.resize(block_size_, -1);
      block[e % block_size_] = s.tokens[e - s.num_cached];
    }
    // The context up to entry `last` (inclusive), into `context`.
    auto read = [&](int last) {
      context.clear();
      for (int e = 0; e <= last; ++e) {
        context.push_back(
            kv_[s.block_table.at(e / block_size_)][e % block_size_]);
      }
    };
    // Each sample point (an index into this step's tokens) from the
    // entries up to its own (every stream's, whatever it sees).
    for (const SamplePoint& p : s.samples) {
      read(s.num_cached + p.index);
      script_(context, &logits);
      out.tokens[i].push_back(p.sampler->Sample(absl::MakeSpan(logits)));
    }
  }
  return out;
}

}  // namespace braid::batching::testing
