// How a Session's streams map onto a multi-stream model's streams
// (docs/MULTISTREAM.md, "Model metadata"). Plain functions; thread-safe.
#ifndef BRAID_FRONTEND_SESSION_STREAMS_H_
#define BRAID_FRONTEND_SESSION_STREAMS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "batching/session.h"
#include "frontend/request.h"
#include "model/model.h"

namespace braid::frontend {

// The loaded model's streams, from its braid.streams.* keys.
struct ModelStreams {
  int count = 1;                   // braid.streams.count
  std::vector<std::string> roles;  // braid.streams.roles: [count] or empty
  // "aligned" | "rows" for a multi-stream model, empty otherwise.
  std::string layout;
  int silence_token_id = -1;

  bool multi() const { return count > 1; }
};

ModelStreams ModelStreamsOf(const model::ModelInfo& config);

// Binds the streams of `open` (already in out->streams, in order) to the
// model's streams, for a multi-stream model (a no-op otherwise): the session
// takes the aligned layout (with `rows` and the silence token for a model of
// the "rows" layout), `out->model_streams` and each stream's
// `model_stream`. A stream with a role binds to the model stream of that
// role (STREAM_ROLE_USER <-> "user", case-insensitive); a stream without
// one binds by order (open.streams[i] <-> model stream i). The prefix is
// model stream 0, as an ordinary request is.
//
// A BRANCH output stream makes its model stream a branch (see
// batching/session.h). Errors name the field: INVALID_ARGUMENT for more
// streams than the model has (open.streams), a role the model does not have
// (open.streams[i].role) and two streams bound to one model stream.
absl::Status BindModelStreams(const SessionOpenSpec& open,
                              const ModelStreams& model,
                              batching::SessionOptions* out);

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_SESSION_STREAMS_H_
