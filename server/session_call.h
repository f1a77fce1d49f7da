#ifndef BRAID_SERVER_SESSION_CALL_H_
#define BRAID_SERVER_SESSION_CALL_H_

#include <memory>
#include <string>

#include "batching/engine.h"
#include "frontend/request_builder.h"
#include "frontend/session_streams.h"
#include "grpcpp/grpcpp.h"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "server/generate_call.h"

namespace braid::server {

// One Session call (docs/MULTISTREAM.md): a gRPC bidi reactor over an engine
// session.
//
// Reads: the first client message must be `open` (else INVALID_ARGUMENT);
// it is validated (stream ids unique and non-empty, kinds and roles
// consistent, prefix and per-stream sampling through frontend::RequestBuilder
// like a Generate request; for a multi-stream model, the aligned layout and
// each stream bound to a model stream by BindModelStreams,
// frontend/session_streams.h) and opens the engine session under the client's
// identity (Backend::owner), or, with `resume`, reattaches that client's
// kept session (Engine::ResumeSession: NOT_FOUND, FAILED_PRECONDITION when
// it is open). Then one read stays in flight: `append` (its prompt
// tokenized) -> Engine::SessionAppend, `interrupt_stream_id` ->
// SessionInterrupt, `cancel` -> Cancel, `close` -> CloseSession (with
// `keep`, the engine keeps the session for resume). A bad action after open
// is answered with a SessionError event and the session stays open. The
// client half-closing its side closes the session (running turns end
// CANCELLED), so keep the request stream open while events are wanted.
//
// Writes: engine events become SessionEvent messages with contiguous
// sequence numbers, `opened` first, one write in flight; while the client is
// slow, queued token events of one stream at contiguous positions are
// coalesced into one message. The call ends OK after `close`, CANCELLED
// after `cancel`, DEADLINE_EXCEEDED when the engine kept the session after
// its idle timeout, with the engine's status when the session fails; each
// end counts in braid_rpcs_total{method="Session"}.
//
// Client cancel, deadline, disconnect, a broken write or a drain abort
// cancel the engine session (its KV blocks are freed within a step); OnDone
// cancels it too if it is still open, so no path leaks it.
//
// Lifetime as GenerateCall: gRPC owns the reactor until OnDone; the engine
// and the registry hold only the Outbox, which decides every write, read
// start and Finish under one mutex. Thread-safe.
class SessionCall
    : public grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionEvent> {
 public:
  struct Backend {
    batching::Engine* engine = nullptr;
    const frontend::RequestBuilder* builder = nullptr;
    int context_length = 0;
    std::string owner;  // the client identity (frontend::ClientIdentity,
                        // frontend/auth.h)
    frontend::ModelStreams model_streams;  // the loaded model's braid.streams.*
  };

  // Starts reading the `open` message. `default_session_id` is used when
  // the client leaves open.session_id empty.
  SessionCall(Backend backend, std::string default_session_id, CallHooks hooks);

  // Rejected before the first read.
  SessionCall(const grpc::Status& error, CallHooks hooks);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Outbox;

  // Validates `open` and opens the engine session (or resumes a kept one);
  // false when the call was finished with an error.
  bool Open(const v1::SessionOpen& open);
  bool Resume(const v1::SessionOpen& open);
  // Applies one message after open; false when no further read is wanted.
  bool Act(const v1::SessionRequest& request);

  const Backend backend_;
  const std::string default_session_id_;
  std::shared_ptr<Outbox> outbox_;
  CallHooks hooks_;
  uint64_t registry_id_ = 0;
  bool session_counted_ = false;  // in the open-sessions gauge
  bool opened_ = false;           // reads are serialized: no lock needed
  v1::SessionRequest request_;    // the read in flight
};

}  // namespace braid::server

#endif  // BRAID_SERVER_SESSION_CALL_H_
