// Early returns on error, for functions returning absl::Status or
// absl::StatusOr<T> (Abseil's own macros are not in Debian's package).
//
//   BRAID_RETURN_IF_ERROR(c.Read(&magic, "magic"));
//   BRAID_ASSIGN_OR_RETURN(config_, LlamaConfig::FromGguf(file));
//   BRAID_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
#ifndef BRAID_UTIL_STATUS_MACROS_H_
#define BRAID_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BRAID_STATUS_CONCAT_INNER(a, b) a##b
#define BRAID_STATUS_CONCAT(a, b) BRAID_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` (an absl::Status) when it is not OK.
#define BRAID_RETURN_IF_ERROR(expr)                               \
  do {                                                            \
    if (absl::Status braid_status = (expr); !braid_status.ok()) { \
      return braid_status;                                        \
    }                                                             \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>); returns its status when it is not
// OK, else moves its value into `lhs` (a declaration or an lvalue).
#define BRAID_ASSIGN_OR_RETURN(lhs, expr)                                     \
  BRAID_ASSIGN_OR_RETURN_IMPL(BRAID_STATUS_CONCAT(braid_statusor_, __LINE__), \
                              lhs, expr)
#define BRAID_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = *std::move(statusor)

#endif  // BRAID_UTIL_STATUS_MACROS_H_
