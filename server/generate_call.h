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
#include "server/ordered_writer.h"
#include "server/stream_registry.h"

namespace braid::server {

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
