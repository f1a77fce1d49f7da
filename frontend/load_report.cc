#include "frontend/load_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "batching/work_queue.h"
#include "proto/xds/data/orca/v3/orca_load_report.pb.h"

namespace braid::frontend {
namespace {

std::string Serialize(const LoadSnapshot& s) {
  xds::data::orca::v3::OrcaLoadReport report;
  report.set_application_utilization(s.utilization());
  report.set_cpu_utilization(s.busy);
  report.set_mem_utilization(s.kv_usage);
  report.set_rps_fractional(s.rps);
  (*report.mutable_utilization())["busy"] = s.busy;
  (*report.mutable_utilization())["occupancy"] = s.occupancy;
  (*report.mutable_utilization())["kv"] = s.kv_usage;
  auto& named = *report.mutable_named_metrics();
  int waiting = 0;
  for (int q = 0; q < batching::kNumQueues; ++q) {
    named[absl::StrCat(
        "queue_", batching::QueueName(static_cast<batching::QueueKind>(q)))] =
        s.waiting[q];
    waiting += s.waiting[q];
  }
  named["waiting"] = waiting;
  named["running"] = s.running;
  named["kv_usage"] = s.kv_usage;
  named["request_seconds"] = s.request_seconds;
  std::string out;
  report.SerializeToString(&out);
  return out;
}

}  // namespace

LoadTracker::LoadTracker(LoadReportOptions options) : options_(options) {
  orca_ = Serialize(current_);
}

void LoadTracker::Observe(const batching::EngineStats& stats, absl::Time now) {
  absl::MutexLock lock(&mu_);
  samples_.push_back({now, stats.busy, stats.steps,
                      stats.completed + stats.cancelled + stats.failed,
                      stats.request_time});
  // The oldest sample kept is the last one at least a window old.
  while (samples_.size() > 2 && samples_[1].time <= now - options_.window) {
    samples_.pop_front();
  }
  const Sample& first = samples_.front();
  const Sample& last = samples_.back();
  const double seconds = absl::ToDoubleSeconds(last.time - first.time);
  LoadSnapshot& s = current_;
  s.kv_usage = stats.kv_blocks_total > 0
                   ? 1.0 - static_cast<double>(stats.kv_blocks_free) /
                               stats.kv_blocks_total
                   : 0.0;
  if (seconds > 0) {
    const double busy = absl::ToDoubleSeconds(last.busy - first.busy);
    s.busy = std::clamp(busy / seconds, 0.0, 1.0);
    const int64_t finished = last.finished - first.finished;
    s.rps = static_cast<double>(finished) / seconds;
    s.request_seconds =
        finished > 0
            ? absl::ToDoubleSeconds(last.request_time - first.request_time) /
                  static_cast<double>(finished)
            : 0.0;
    s.occupancy = std::min(
        1.0, s.rps * s.request_seconds / std::max(1, options_.max_num_seqs));
    if (s.rps > 0 && s.utilization() > 0) {
      s.capacity = s.rps / s.utilization();
    }
    if (last.steps > first.steps) {
      s.step_ms = 1000 * busy / static_cast<double>(last.steps - first.steps);
    }
  }
  for (int q = 0; q < batching::kNumQueues; ++q) {
    s.waiting[q] = stats.queue_sizes[q] - stats.queue_running[q];
  }
  s.running = stats.running;
  orca_ = Serialize(s);
}

void LoadTracker::SetState(ReplicaState state) {
  absl::MutexLock lock(&mu_);
  current_.state = state;
}

LoadSnapshot LoadTracker::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

std::string LoadTracker::OrcaReport() const {
  absl::MutexLock lock(&mu_);
  return orca_;
}

std::string LoadTracker::AgentReply() const {
  const LoadSnapshot s = Current();
  switch (s.state) {
    case ReplicaState::kLoading:
    case ReplicaState::kStalled:
      return "down\n";
    case ReplicaState::kDraining:
      return "drain\n";
    case ReplicaState::kServing:
      break;
  }
  const double weight =
      s.capacity > 0 ? 100 * s.capacity / options_.reference_capacity : 100;
  int percent = static_cast<int>(std::clamp(std::lround(weight), 1L, 256L));
  {
    // HAProxy re-places a server in its round robin on every weight change,
    // which skews the shares when the weight jitters: keep the last weight
    // until it is more than 5% off.
    absl::MutexLock lock(&mu_);
    if (last_percent_ > 0 &&
        std::abs(percent - last_percent_) <= 0.05 * last_percent_) {
      percent = last_percent_;
    }
    last_percent_ = percent;
  }
  return absl::StrCat("ready up ", percent, "%\n");
}

}  // namespace braid::frontend
