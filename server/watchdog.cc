#include "server/watchdog.h"

namespace braid::server {

StepWatchdog::Change StepWatchdog::Check(const batching::EngineStats& stats,
                                         absl::Time now) {
  if (bound_ <= absl::ZeroDuration()) return Change::kNone;
  const bool in_step = stats.step_started != absl::InfinitePast();
  if (stalled_) {
    if (in_step && stats.step_started == stalled_step_) {
      stuck_for_ = now - stats.step_started;
      return Change::kNone;
    }
    stalled_ = false;
    return Change::kRecovered;
  }
  if (in_step && now - stats.step_started > bound_) {
    stalled_ = true;
    stalled_step_ = stats.step_started;
    stuck_for_ = now - stats.step_started;
    return Change::kStalled;
  }
  return Change::kNone;
}

}  // namespace braid::server
