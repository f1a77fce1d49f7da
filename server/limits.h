// Transport limits of the gRPC server: message sizes, concurrent streams per
// connection and keepalive enforcement, as gRPC channel arguments.
// Stateless functions.
#ifndef BRAID_SERVER_LIMITS_H_
#define BRAID_SERVER_LIMITS_H_

#include "absl/status/status.h"
#include "grpcpp/server_builder.h"

namespace braid::server {

struct ServerLimits {
  int max_receive_message_bytes = 4 << 20;
  int max_send_message_bytes = 4 << 20;
  int max_concurrent_streams = 100;  // per HTTP/2 connection
  // The server pings a connection idle this long, and closes it when the
  // answer takes longer than keepalive_timeout_seconds (dead peers).
  int keepalive_time_seconds = 60;
  int keepalive_timeout_seconds = 20;
  // Clients pinging more often than this get a strike; after
  // keepalive_max_ping_strikes the connection is closed (GOAWAY
  // ENHANCE_YOUR_CALM "too_many_pings").
  int keepalive_min_ping_interval_seconds = 10;
  int keepalive_max_ping_strikes = 2;
  // Whether clients may ping a connection that has no call in flight.
  bool keepalive_permit_without_calls = false;

  // INVALID_ARGUMENT names the flag (--<field name>) that is out of range.
  absl::Status Validate() const;
};

void ApplyLimits(const ServerLimits& limits, grpc::ServerBuilder* builder);

}  // namespace braid::server

#endif  // BRAID_SERVER_LIMITS_H_
