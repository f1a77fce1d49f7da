#include "frontend/session_streams.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braid::frontend {
namespace {

// The model role a StreamRole names (braid.streams.roles spelling).
const char* RoleName(int role) {
  switch (role) {
    case kRoleSystem:
      return "system";
    case kRoleUser:
      return "user";
    case kRoleTool:
      return "tool";
    case kRoleReasoning:
      return "reasoning";
    case kRoleOutput:
      return "output";
    default:
      return "";
  }
}

// "model stream 1 (\"user\")", or without the role when the model names none.
std::string Describe(const ModelStreams& model, int m) {
  if (m >= static_cast<int>(model.roles.size())) {
    return absl::StrCat("model stream ", m);
  }
  return absl::StrCat("model stream ", m, " (\"", model.roles[m], "\")");
}

std::string RolesList(const ModelStreams& model) {
  return model.roles.empty()
             ? std::string("no roles")
             : absl::StrCat("roles ", absl::StrJoin(model.roles, ", "));
}

}  // namespace

ModelStreams ModelStreamsOf(const model::ModelInfo& config) {
  ModelStreams m;
  m.count = config.n_streams;
  m.roles = config.stream_roles;
  if (m.multi()) {
    m.layout =
        config.stream_layout == model::StreamLayout::kRows ? "rows" : "aligned";
  }
  m.silence_token_id = config.silence_token_id;
  return m;
}

// Design note. Entries carry the model stream they belong to, since that is
// what selects the stream embedding, so each model stream holds at most one
// session stream, and the prefix, which ordinary requests share through the
// prefix cache, keeps their stream 0. Visibility is a property of the tag,
// so a BRANCH output stream makes its model stream a branch (it sees the
// prefix, the input streams and itself; input streams do not see it): one
// branch per model stream, never two branches of one role.
absl::Status BindModelStreams(const SessionOpenSpec& open,
                              const ModelStreams& model,
                              batching::SessionOptions* out) {
  if (!model.multi()) return absl::OkStatus();
  const int n = static_cast<int>(open.streams.size());
  if (n > model.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "open.streams: ", n, " streams, but the model has ", model.count,
        " (braid.streams.count; ", RolesList(model), ")"));
  }
  out->aligned = true;
  out->model_streams = model.count;
  if (model.layout == "rows") {
    out->rows = true;
    out->silence_token_id = model.silence_token_id;
  }
  std::vector<int> bound(model.count, -1);  // open.streams index
  for (int i = 0; i < n; ++i) {
    const StreamSpec& spec = open.streams[i];
    const std::string field = absl::StrCat("open.streams[", i, "]");
    int m = i;
    if (spec.role != kRoleUnspecified) {
      const char* role = RoleName(spec.role);
      m = -1;
      for (int k = 0; k < static_cast<int>(model.roles.size()); ++k) {
        if (absl::EqualsIgnoreCase(model.roles[k], role)) m = k;
      }
      if (m < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".role: the model has no \"", role,
                         "\" stream (", RolesList(model),
                         "); leave the role unset to bind streams by order"));
      }
    }
    if (bound[m] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", Describe(model, m),
                       " is already bound to open.streams[", bound[m], "]"));
    }
    bound[m] = i;
    out->streams[i].model_stream = m;
  }
  return absl::OkStatus();
}

}  // namespace braid::frontend
