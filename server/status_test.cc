#include "server/status.h"

#include "gtest/gtest.h"

namespace braid::server {
namespace {

TEST(ToGrpcStatusTest, KeepsCodeAndMessage) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const struct {
    absl::Status in;
    grpc::StatusCode want;
  } cases[] = {
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::ResourceExhaustedError("full"),
       grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("draining"), grpc::StatusCode::UNAVAILABLE},
      {absl::CancelledError("gone"), grpc::StatusCode::CANCELLED},
      {absl::DeadlineExceededError("late"),
       grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::FailedPreconditionError("no model"),
       grpc::StatusCode::FAILED_PRECONDITION},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& c : cases) {
    grpc::Status got = ToGrpcStatus(c.in);
    EXPECT_EQ(got.error_code(), c.want);
    EXPECT_EQ(got.error_message(), std::string(c.in.message()));
  }
}

}  // namespace
}  // namespace braid::server
