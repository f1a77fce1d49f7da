// A SessionSink that records every event and lets a test wait (with a
// deadline) for a condition on them; an optional hook runs on the engine
// thread for each event (to act mid-generation). Thread-safe.
#ifndef BRAID_BATCHING_TESTING_SESSION_SINK_H_
#define BRAID_BATCHING_TESTING_SESSION_SINK_H_

#include <functional>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "batching/session.h"

namespace braid::batching::testing {

class RecordingSessionSink : public SessionSink {
 public:
  using Hook = std::function<void(const SessionEvent&)>;
  explicit RecordingSessionSink(Hook hook = nullptr) : hook_(std::move(hook)) {}

  void Push(SessionEvent event) override {
    if (hook_) hook_(event);
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }

  // Waits until `count` events of `kind` arrived; false on timeout.
  bool WaitFor(SessionEvent::Kind kind, int count,
               absl::Duration timeout = absl::Seconds(300)) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return Count(kind) >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }

  std::vector<SessionEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  // Token ids written on `stream`, in order.
  std::vector<int32_t> Tokens(int stream) {
    absl::MutexLock lock(&mu_);
    std::vector<int32_t> ids;
    for (const SessionEvent& e : events_) {
      if (e.kind != SessionEvent::Kind::kTokens || e.stream != stream) continue;
      for (const SampledToken& t : e.tokens) ids.push_back(t.token_id);
    }
    return ids;
  }

 private:
  int Count(SessionEvent::Kind kind) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int n = 0;
    for (const SessionEvent& e : events_) n += e.kind == kind;
    return n;
  }

  const Hook hook_;
  absl::Mutex mu_;
  std::vector<SessionEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_SESSION_SINK_H_
