#include "server/limits.h"

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"

namespace braid::server {
namespace {

absl::Status AtLeast(const char* flag, int value, int min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " must be >= ", min));
}

}  // namespace

absl::Status ServerLimits::Validate() const {
  for (absl::Status s : {
           AtLeast("max_receive_message_bytes", max_receive_message_bytes,
                   1024),
           AtLeast("max_send_message_bytes", max_send_message_bytes, 1024),
           AtLeast("max_concurrent_streams", max_concurrent_streams, 1),
           AtLeast("keepalive_time_seconds", keepalive_time_seconds, 1),
           AtLeast("keepalive_timeout_seconds", keepalive_timeout_seconds, 1),
           AtLeast("keepalive_min_ping_interval_seconds",
                   keepalive_min_ping_interval_seconds, 1),
           AtLeast("keepalive_max_ping_strikes", keepalive_max_ping_strikes, 0),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void ApplyLimits(const ServerLimits& l, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(l.max_receive_message_bytes);
  builder->SetMaxSendMessageSize(l.max_send_message_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              l.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              l.keepalive_time_seconds * 1000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              l.keepalive_timeout_seconds * 1000);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      l.keepalive_min_ping_interval_seconds * 1000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES,
                              l.keepalive_max_ping_strikes);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                              l.keepalive_permit_without_calls ? 1 : 0);
}

}  // namespace braid::server
