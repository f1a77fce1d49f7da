#ifndef BRAID_SERVER_SERVICE_H_
#define BRAID_SERVER_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "batching/engine.h"
#include "frontend/auth.h"
#include "frontend/load_report.h"
#include "frontend/request_builder.h"
#include "metrics/server_metrics.h"
#include "model/model.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "server/generate_call.h"
#include "server/session_call.h"

namespace braid::server {

// Facts about the loaded model and daemon for GetModelInfo.
struct ServiceInfo {
  std::string model_path;
  int64_t file_size_bytes = 0;
  int context_length = 0;
  int num_threads = 0;
  std::string chat_template_name;
};

// What the service needs besides the model; everything is optional.
struct ServiceOptions {
  const frontend::TokenAuthenticator* auth =
      nullptr;                                // null: no authentication
  metrics::ServerMetrics* metrics = nullptr;  // null: no metrics
  // null: no load reports in the calls' trailers.
  const frontend::LoadTracker* load = nullptr;
  // Generate requests end with DEADLINE_EXCEEDED after this long, whatever
  // the client's deadline.
  absl::Duration max_request_duration = absl::InfiniteDuration();
};

// The braid.v1.Braid service on gRPC's callback API. A thin layer: auth,
// proto <-> engine types, validation through frontend::RequestBuilder, errors
// through ToGrpcStatus. Reactions never block and never run model code.
//
// Lifecycle: it serves before the model is loaded (every RPC gets
// UNAVAILABLE until SetReady), then serves, then drains (StartDrain: new
// RPCs get UNAVAILABLE while open Generate and Session streams go on;
// AbortStreams ends those left).
//
// Thread-safe; what SetReady receives outlives the service.
class BraidService final : public v1::Braid::CallbackService {
 public:
  explicit BraidService(ServiceOptions options);
  ~BraidService() override;

  // Publishes the loaded model; call once.
  void SetReady(const model::ModelInfo& model,
                const model::Tokenizer* tokenizer,
                const model::ChatTemplate* chat_template,
                batching::Engine* engine, ServiceInfo info);
  void StartDrain();
  int open_streams() const { return streams_.size(); }
  // Ends every open Generate and Session stream with `status`; returns how
  // many.
  int AbortStreams(const grpc::Status& status);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const v1::GenerateRequest* request) override;

  grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionEvent>* Session(
      grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;

  grpc::ServerUnaryReactor* Detokenize(
      grpc::CallbackServerContext* context,
      const v1::DetokenizeRequest* request,
      v1::DetokenizeResponse* response) override;

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  struct Backend;

  // Auth, then the daemon's state: the backend to serve the call, or the
  // status to fail it with.
  absl::StatusOr<const Backend*> Admit(grpc::CallbackServerContext* context,
                                       frontend::Scope scope,
                                       absl::string_view rpc_name) const;
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                 metrics::Rpc rpc, const absl::Status& status);

  const ServiceOptions options_;
  std::unique_ptr<Backend> backend_owned_;
  std::atomic<const Backend*> backend_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> session_number_{0};  // default session ids
  StreamRegistry streams_;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_SERVICE_H_
