// The stuck-step watchdog: tells when the engine's step in progress has run
// longer than a bound, and when steps flow again. The composition root polls
// it with the engine's counters and turns health NOT_SERVING meanwhile.
#ifndef BRAID_SERVER_WATCHDOG_H_
#define BRAID_SERVER_WATCHDOG_H_

#include "absl/time/time.h"
#include "batching/engine.h"

namespace braid::server {

class StepWatchdog {
 public:
  enum class Change { kNone, kStalled, kRecovered };

  // `bound` <= 0: never stalled.
  explicit StepWatchdog(absl::Duration bound) : bound_(bound) {}

  // kStalled once when the step in progress passes the bound, kRecovered
  // once when that step (or a later one) has ended.
  Change Check(const batching::EngineStats& stats, absl::Time now);
  bool stalled() const { return stalled_; }
  // How long the stuck step had run at the last Check.
  absl::Duration stuck_for() const { return stuck_for_; }

 private:
  const absl::Duration bound_;
  bool stalled_ = false;
  absl::Time stalled_step_ = absl::InfinitePast();
  absl::Duration stuck_for_;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_WATCHDOG_H_
