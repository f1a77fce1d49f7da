// An OutputSink that records every chunk; WaitFinal blocks (with a deadline)
// until the final chunk arrives. Thread-safe.
#ifndef BRAID_BATCHING_TESTING_RECORDING_SINK_H_
#define BRAID_BATCHING_TESTING_RECORDING_SINK_H_

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "batching/request.h"

namespace braid::batching::testing {

class RecordingSink : public OutputSink {
 public:
  void Push(OutputChunk chunk) override {
    absl::MutexLock lock(&mu_);
    if (chunks_.empty()) first_push_ = absl::Now();
    if (chunk.final) final_push_ = absl::Now();
    chunks_.push_back(std::move(chunk));
  }

  // The final chunk, or a default one with final = false after `timeout`.
  OutputChunk WaitFinal(absl::Duration timeout = absl::Seconds(120)) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !chunks_.empty() && chunks_.back().final;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) return {};
    return chunks_.back();
  }

  bool done() {
    absl::MutexLock lock(&mu_);
    return !chunks_.empty() && chunks_.back().final;
  }

  std::vector<int32_t> Tokens() {
    absl::MutexLock lock(&mu_);
    std::vector<int32_t> ids;
    for (const auto& c : chunks_) {
      ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
    }
    return ids;
  }

  std::vector<OutputChunk> Chunks() {
    absl::MutexLock lock(&mu_);
    return chunks_;
  }

  absl::Time final_push() {
    absl::MutexLock lock(&mu_);
    return final_push_;
  }

  absl::Time first_push() {
    absl::MutexLock lock(&mu_);
    return first_push_;
  }

 private:
  absl::Mutex mu_;
  std::vector<OutputChunk> chunks_ ABSL_GUARDED_BY(mu_);
  absl::Time first_push_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time final_push_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_RECORDING_SINK_H_
