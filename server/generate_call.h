#ifndef BRAID_SERVER_GENERATE_CALL_H_
#define BRAID_SERVER_GENERATE_CALL_H_

#include <memory>

#include "batching/engine.h"
#include "grpcpp/grpcpp.h"
#include "proto/braid/v1/braid.grpc.pb.h"

namespace braid::server {

// One Generate call: a gRPC write reactor fed by the engine.
//
// The engine pushes output chunks from its thread (OutputSink::Push); the
// reactor keeps exactly one write in flight and, when the client reads slower
// than tokens arrive, coalesces every queued chunk into the next message.
// Client cancellation, a deadline or a disconnect reaches OnCancel, which
// cancels the engine request (its KV cache is freed at the next step).
//
// Lifetime: gRPC owns the reactor until OnDone, where it deletes itself. The
// engine holds only the `Outbox` (shared_ptr), which decides every write and
// the Finish under one mutex and drops chunks once the call is over. A gRPC
// operation is started only after the decision marked it in flight, so the
// reactor cannot reach OnDone while one is being started. Thread-safe.
class GenerateCall : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Validated request; submits it to the engine.
  GenerateCall(batching::Engine* engine, batching::GenerationRequest request);

  // Rejected before reaching the engine.
  explicit GenerateCall(const grpc::Status& error);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Outbox;

  std::shared_ptr<Outbox> outbox_;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_GENERATE_CALL_H_
