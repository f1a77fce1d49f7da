// The write side of a streaming gRPC call (GenerateCall, SessionCall): the
// engine's output, queued as items, becomes the call's messages in order,
// with one write in flight, and the call finishes exactly once, under one
// mutex. A call type says how queued items make its next message (Next)
// and how its engine work is stopped (CancelEngine).
#ifndef BRAID_SERVER_ORDERED_WRITER_H_
#define BRAID_SERVER_ORDERED_WRITER_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "frontend/load_report.h"
#include "grpcpp/grpcpp.h"
#include "metrics/server_metrics.h"
#include "server/stream_registry.h"

namespace braid::server {

// What a call reports to, all optional (null in tests).
struct CallHooks {
  StreamRegistry* registry = nullptr;
  metrics::ServerMetrics* metrics = nullptr;
  // With both: the replica's ORCA load report in the call's trailers.
  const frontend::LoadTracker* load = nullptr;
  grpc::CallbackServerContext* context = nullptr;
};

// The trailer Envoy's client-side weighted round robin reads.
inline constexpr char kLoadReportTrailer[] = "endpoint-load-metrics-bin";

// Adds the load report to the call's trailers (before its Finish).
inline void AddLoadReport(const CallHooks& hooks) {
  if (hooks.load != nullptr && hooks.context != nullptr) {
    hooks.context->AddTrailingMetadata(kLoadReportTrailer,
                                       hooks.load->OrcaReport());
  }
}

// `Reactor` has StartWrite(const Response*) and Finish(grpc::Status).
//
// Lifetime: the reactor owns nothing here; it holds the writer by
// shared_ptr, as do the engine (a sink) and the registry (weak), and calls
// Detach in OnDone. A gRPC operation is started only after the decision
// marked it in flight, so the reactor cannot reach OnDone while one is being
// started. Thread-safe.
template <typename Reactor, typename Response, typename Item>
class OrderedWriter : public AbortableStream {
 public:
  OrderedWriter(Reactor* call, const CallHooks& hooks, metrics::Rpc rpc)
      : call_(call), hooks_(hooks), rpc_(rpc) {}

  // The reactor's OnWriteDone.
  void WriteDone(bool ok) {
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok && !cancelled_ && !finished_) {  // the stream is broken
        cancelled_ = true;
        cancel = true;
        cancel_status_ = grpc::Status(grpc::StatusCode::CANCELLED,
                                      "the client's stream broke");
      }
    }
    if (cancel) CancelEngine();
    Pump();
  }

  // Ends the call with `status` (unless it ended) and its engine work.
  void Abort(const grpc::Status& status) override {
    if (!MarkCancelled(status)) return;
    CancelEngine();
    Pump();
  }

  // Finishes with `status` now, or once the operation in flight is done.
  void FinishNow(const grpc::Status& status) {
    Reactor* call;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || call_ == nullptr) return;
      if (write_in_flight_ || read_starting_) {
        if (!cancelled_) {
          cancelled_ = true;
          cancel_status_ = status;
        }
        return;  // Pump finishes when the operation is done
      }
      finished_ = true;
      call = call_;
    }
    Finish(call, status);
  }

  // The reactor's OnDone: nothing more reaches the call.
  void Detach() {
    absl::MutexLock lock(&mu_);
    call_ = nullptr;
    queue_.clear();
  }

 protected:
  enum class Step { kIdle, kWrite, kFinish };

  // The next message from queue_ into *out (kWrite), the call's end with
  // *status (kFinish), or nothing to do yet (kIdle).
  virtual Step Next(Response* out, grpc::Status* status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  virtual void CancelEngine() = 0;
  // The last message was written: the call ends OK even if it was
  // cancelled meanwhile.
  virtual bool Completed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return false;
  }

  // False when the call already finished or was cancelled.
  bool MarkCancelled(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_ || cancelled_) return false;
    cancelled_ = true;
    cancel_status_ = status;
    return true;
  }

  // Whether items may still be queued (the call is live).
  bool Accepting() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return call_ != nullptr && !finished_ && !cancelled_;
  }

  // Starts the next write, or finishes the call, when there is something to
  // do and no operation is in flight or being started.
  void Pump() {
    Reactor* call;
    grpc::Status status;
    Step step;
    {
      absl::MutexLock lock(&mu_);
      call = call_;
      if (call == nullptr || finished_ || write_in_flight_ || read_starting_) {
        return;
      }
      if (Completed()) {
        step = Step::kFinish;
        status = grpc::Status::OK;
      } else if (cancelled_) {
        step = Step::kFinish;
        status = cancel_status_;
      } else {
        step = Next(&response_, &status);
      }
      if (step == Step::kIdle) return;
      if (step == Step::kWrite) write_in_flight_ = true;
      if (step == Step::kFinish) finished_ = true;
    }
    if (step == Step::kFinish) {
      Finish(call, status);
    } else {
      call->StartWrite(&response_);
    }
  }

  // Once per call, after the decision marked it finished.
  void Finish(Reactor* call, const grpc::Status& status) {
    if (hooks_.metrics != nullptr) {
      hooks_.metrics->RecordRpc(rpc_, static_cast<int>(status.error_code()));
    }
    AddLoadReport(hooks_);
    call->Finish(status);
  }

  metrics::ServerMetrics* metrics() const { return hooks_.metrics; }

  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // A read is being started (bidi calls): no Finish meanwhile.
  bool read_starting_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_sequence_number_ ABSL_GUARDED_BY(mu_) = 0;

 private:
  Reactor* call_ ABSL_GUARDED_BY(mu_);
  const CallHooks hooks_;
  const metrics::Rpc rpc_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() was called
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status cancel_status_ ABSL_GUARDED_BY(mu_);  // when cancelled_
  Response response_;                                // the write in flight
};

}  // namespace braid::server

#endif  // BRAID_SERVER_ORDERED_WRITER_H_
