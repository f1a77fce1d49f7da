#include "util/status_macros.h"

#include <string>

#include "gtest/gtest.h"

namespace braid {
namespace {

absl::Status Check(int x) {
  return x >= 0 ? absl::OkStatus() : absl::InvalidArgumentError("negative");
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  BRAID_RETURN_IF_ERROR(Check(x));
  BRAID_ASSIGN_OR_RETURN(const int half, Half(x));
  int quarter = 0;
  BRAID_ASSIGN_OR_RETURN(quarter, Half(half));
  return quarter;
}

TEST(StatusMacrosTest, ReturnEarlyOrGoOn) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(-4).status().message(), "negative");
  EXPECT_EQ(Quarter(6).status().message(), "odd");  // the second Half
  EXPECT_EQ(Quarter(5).status().message(), "odd");
}

}  // namespace
}  // namespace braid
