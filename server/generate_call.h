#ifndef BRAID_SERVER_GENERATE_CALL_H_
#define BRAID_SERVER_GENERATE_CALL_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "batching/engine.h"
#include "grpcpp/grpcpp.h"
#include "metrics/server_metrics.h"
#include "proto/braid/v1/braid.grpc.pb.h"

namespace braid::server {

// An open stream that can be ended from outside (drain).
class AbortableStream {
 public:
  virtual ~AbortableStream() = default;
  // Finishes the call with `status` (unless it already finished) and
  // cancels its engine work.
  virtual void Abort(const grpc::Status& status) = 0;
};

// The open Generate streams, so that a drain can wait for them and end the
// ones left when the grace period is over. Thread-safe.
class StreamRegistry {
 public:
  uint64_t Add(std::weak_ptr<AbortableStream> stream);
  void Remove(uint64_t id);
  int size() const;
  // Aborts every open stream with `status`; returns how many.
  int AbortAll(const grpc::Status& status);

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::weak_ptr<AbortableStream>> streams_
      ABSL_GUARDED_BY(mu_);
};

// What a call reports to, all optional (null in tests).
struct CallHooks {
  StreamRegistry* registry = nullptr;
  metrics::ServerMetrics* metrics = nullptr;
};

// One Generate call: a gRPC write reactor fed by the engine.
//
// The engine pushes output chunks from its thread (OutputSink::Push); the
// reactor keeps exactly one write in flight and, when the client reads slower
// than tokens arrive, coalesces every queued chunk into the next message.
// Client cancellation, a deadline or a disconnect reaches OnCancel, which
// cancels the engine request (its KV cache is freed at the next step). A
// drain may Abort the call with a status of its choosing.
//
// Lifetime: gRPC owns the reactor until OnDone, where it deletes itself. The
// engine and the registry hold only the `Outbox` (shared / weak), which
// decides every write and the Finish under one mutex and drops chunks once
// the call is over. A gRPC operation is started only after the decision
// marked it in flight, so the reactor cannot reach OnDone while one is
// being started. Thread-safe.
class GenerateCall : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Validated request; submits it to the engine. `client_deadline` tells a
  // deadline from a client cancel in the metrics.
  GenerateCall(batching::Engine* engine, batching::GenerationRequest request,
               absl::Time client_deadline, CallHooks hooks);

  // Rejected before reaching the engine.
  GenerateCall(const grpc::Status& error, CallHooks hooks);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Outbox;

  std::shared_ptr<Outbox> outbox_;
  CallHooks hooks_;
  uint64_t registry_id_ = 0;
  bool session_counted_ = false;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_GENERATE_CALL_H_
