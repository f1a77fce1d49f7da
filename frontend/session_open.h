// Validation of a Session call's `open` message (docs/MULTISTREAM.md): the
// engine's SessionOptions and the call's stream table from it, every bad
// field an INVALID_ARGUMENT naming it (from the request's root, e.g.
// "open.streams[2].sampling.top_k: ..."). Pure functions; thread-safe.
#ifndef BRAID_FRONTEND_SESSION_OPEN_H_
#define BRAID_FRONTEND_SESSION_OPEN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "batching/session.h"
#include "frontend/request.h"
#include "frontend/request_builder.h"
#include "frontend/session_streams.h"

namespace braid::frontend {

// INVALID_ARGUMENT "<field>: <why>".
absl::Status InvalidField(absl::string_view field, absl::string_view why);

// Prefixes a RequestBuilder error (which names fields from the
// request's root, e.g. "sampling.top_k: ...") with where it sits in the
// session.
absl::Status UnderField(absl::string_view where, const absl::Status& status);

// What a call knows of each stream; index 0 is the prefix.
struct SessionStreamInfo {
  std::string id;
  bool output = false;
  bool logprobs = false;
};

// A session as the engine opens it and the call's stream table.
struct BuiltSession {
  batching::SessionOptions options;
  std::vector<SessionStreamInfo> streams;
};

// open -> engine options and the stream table (validated; stream ids unique
// and non-empty, kinds and roles consistent, the prefix and per-stream
// sampling through `builder` like a Generate request, a multi-stream
// model's streams bound by BindModelStreams).
absl::StatusOr<BuiltSession> BuildSession(const SessionOpenSpec& open,
                                          const RequestBuilder& builder,
                                          const ModelStreams& model);

// open with resume names a kept session and nothing else: the session keeps
// its prefix, streams and settings.
absl::Status CheckResume(const SessionOpenSpec& open);

// The call's stream table of a session's options.
std::vector<SessionStreamInfo> StreamTable(
    const batching::SessionOptions& options);

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_SESSION_OPEN_H_
