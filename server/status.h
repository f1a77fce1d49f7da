#ifndef BRAID_SERVER_STATUS_H_
#define BRAID_SERVER_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace braid::server {

// The one place an absl::Status becomes a gRPC status (same code, same
// message).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace braid::server

#endif  // BRAID_SERVER_STATUS_H_
