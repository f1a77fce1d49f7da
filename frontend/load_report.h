// A replica's load as the balancers in front of braidd read it
// (docs/OPERATIONS.md, "Capacity-weighted routing"): an ORCA load report
// (xds.data.orca.v3.OrcaLoadReport) for the `endpoint-load-metrics-bin`
// trailer of every gRPC call, which Envoy's client-side weighted round robin
// turns into weights (requests per second / utilisation), and the weight
// and state an HAProxy agent check reads.
//
// Utilisation is batch-slot occupancy, not the busy share: a batching
// engine is busy whenever one request runs, so the busy share saturates
// long before the replica is full. Occupancy is requests in flight over
// max_num_seqs, by Little's law (requests finished per second x their mean
// time in the engine), measured over the same window as the rate, so a
// balancer's rate / utilisation is max_num_seqs / mean request time: the
// replica's speed at its current load, steady even when few requests finish
// in a window.
//
// The composition root calls Observe with the engine's counters about every
// 100 ms; the front ends read the latest report. Thread-safe.
#ifndef BRAID_FRONTEND_LOAD_REPORT_H_
#define BRAID_FRONTEND_LOAD_REPORT_H_

#include <array>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "batching/engine.h"

namespace braid::frontend {

// The replica's state for balancers.
enum class ReplicaState {
  kLoading,  // not routable yet
  kServing,
  kStalled,   // an engine step is over the watchdog's bound
  kDraining,  // shutting down: send nothing new
};

// The load over the last window.
struct LoadSnapshot {
  ReplicaState state = ReplicaState::kLoading;
  double busy = 0;             // share of the window spent in engine steps
  double kv_usage = 0;         // KV blocks in use / all blocks
  double rps = 0;              // requests finished per second
  double request_seconds = 0;  // their mean time in the engine (0: none)
  double occupancy = 0;        // rps x request_seconds / max_num_seqs
  double step_ms = 0;  // mean step duration (the last measured one; 0: none)
  // What a balancer weighs the replica by: rps / utilization(), that is
  // max_num_seqs / request_seconds while occupancy leads; the last one
  // measured (0: none yet).
  double capacity = 0;
  std::array<int, batching::kNumQueues> waiting = {};  // per queue
  int running = 0;
  // What balancers divide by: the larger of occupancy and KV usage.
  double utilization() const {
    return occupancy > kv_usage ? occupancy : kv_usage;
  }
};

struct LoadReportOptions {
  absl::Duration window = absl::Seconds(5);
  int max_num_seqs = 64;  // the engine's batch slots
  // The capacity an agent check reports as weight 100% (AgentReply).
  double reference_capacity = 100;
};

class LoadTracker {
 public:
  explicit LoadTracker(LoadReportOptions options = {});

  // The engine's counters at `now` (monotonic in practice).
  void Observe(const batching::EngineStats& stats, absl::Time now);
  void SetState(ReplicaState state);

  LoadSnapshot Current() const;
  // The current report, serialized (for the `endpoint-load-metrics-bin`
  // trailer): application_utilization = utilization(), cpu_utilization =
  // busy, mem_utilization = KV usage, rps_fractional, and named metrics
  // (queue depth per queue, running, KV usage). With no request finished in
  // the window, rate and utilisation are 0, which Envoy skips (it keeps the
  // replica's last weight).
  std::string OrcaReport() const;
  // An HAProxy agent-check reply, one line: "down" while loading or stalled,
  // "drain" while draining, else "ready up N%" with N = 100 x capacity /
  // reference_capacity clamped to [1, 256] (100 before any request has
  // finished): the weight Envoy computes from the ORCA report, so both
  // balancers weigh a replica alike. A queue or a full cache lengthens the
  // request time and so lowers it. N changes only when it moves by more
  // than 5%.
  std::string AgentReply() const;

 private:
  struct Sample {
    absl::Time time;
    absl::Duration busy;
    int64_t steps = 0;
    int64_t finished = 0;
    absl::Duration request_time;
  };

  const LoadReportOptions options_;
  mutable absl::Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);  // the window's
  LoadSnapshot current_ ABSL_GUARDED_BY(mu_);
  std::string orca_ ABSL_GUARDED_BY(mu_);              // current_, serialized
  mutable int last_percent_ ABSL_GUARDED_BY(mu_) = 0;  // AgentReply's
};

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_LOAD_REPORT_H_
