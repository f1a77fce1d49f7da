#include "server/grpc_server.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/credentials.h"
#include "server/limits.h"

namespace braid::server {
namespace {

constexpr char kServiceName[] = "braid.v1.Braid";

// Linking gRPC's reflection library registers its plugin in every server
// builder; this option takes it out again unless --reflection.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

}  // namespace

void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d\n", port);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

void SetHealth(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    BraidService* service, const DaemonFlags& flags) {
  auto credentials = MakeServerCredentials(flags.tls, flags.listen);
  if (!credentials.ok()) return credentials.status();
  if (absl::Status s = flags.limits.Validate(); !s.ok()) return s;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!flags.reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  int port = 0;
  builder.AddListeningPort(flags.listen, *credentials, &port);
  ApplyLimits(flags.limits, &builder);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", flags.listen));
  }
  SetHealth(server.get(), false);
  std::fprintf(stderr, "braidd: listening on port %d (%s); loading\n", port,
               flags.tls.cert_file.empty() ? "plaintext" : "TLS");
  WritePortFile(flags.port_file, port);
  return server;
}

void Drain(grpc::Server* server, BraidService& service,
           openai::HttpServer* http, metrics::ServerMetrics& server_metrics,
           int grace_seconds, absl::FunctionRef<bool()> hurry) {
  service.StartDrain();
  if (http != nullptr) http->StartDrain();
  SetHealth(server, false);
  server_metrics.SetState(metrics::ServerState::kDraining);
  auto open = [&] {
    return service.open_streams() +
           (http != nullptr ? http->open_requests() : 0);
  };
  std::fprintf(stderr, "braidd: draining: %d open streams, %d s grace period\n",
               open(), grace_seconds);
  const absl::Time deadline = absl::Now() + absl::Seconds(grace_seconds);
  while (open() > 0 && absl::Now() < deadline && !hurry()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const std::string why = absl::StrCat(
      "braidd shut down before this request finished: the "
      "drain grace period (--drain_grace_seconds=",
      grace_seconds, ") ended; retry on another replica");
  int aborted =
      service.AbortStreams(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
  if (http != nullptr) aborted += http->AbortAll(absl::UnavailableError(why));
  if (aborted > 0) {
    std::fprintf(stderr, "braidd: ended %d streams after the grace period\n",
                 aborted);
  }
  // Lets the final statuses out, then cancels whatever is left.
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (http != nullptr) {
    // The aborted HTTP requests write their error events first.
    const absl::Time end = absl::Now() + absl::Seconds(2);
    while (http->open_requests() > 0 && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    http->Stop();
  }
}

}  // namespace braid::server
