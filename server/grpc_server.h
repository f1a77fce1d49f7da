// The gRPC side of braidd's lifecycle: listen (health NOT_SERVING) before
// the model loads, flip health when serving, and drain on a signal.
#ifndef BRAID_SERVER_GRPC_SERVER_H_
#define BRAID_SERVER_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "metrics/server_metrics.h"
#include "openai/http_server.h"
#include "server/flags.h"
#include "server/service.h"

namespace braid::server {

// Starts serving `service` on flags.listen (TLS and limits from the flags)
// with health NOT_SERVING, and writes the port to flags.port_file.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    BraidService* service, const DaemonFlags& flags);

// grpc.health.v1 for the server and for braid.v1.Braid.
void SetHealth(grpc::Server* server, bool serving);

// Stops taking work (health NOT_SERVING, new RPCs UNAVAILABLE; the HTTP
// front end, when there is one, likewise), lets open streams and HTTP
// requests finish within grace_seconds (or until hurry() says stop), ends
// the rest with UNAVAILABLE, then shuts the servers down.
void Drain(grpc::Server* server, BraidService& service,
           openai::HttpServer* http, metrics::ServerMetrics& server_metrics,
           int grace_seconds, absl::FunctionRef<bool()> hurry);

// Writes `port` and a newline to `path` atomically (nothing when empty).
void WritePortFile(const std::string& path, int port);

}  // namespace braid::server

#endif  // BRAID_SERVER_GRPC_SERVER_H_
