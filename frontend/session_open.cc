#include "frontend/session_open.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace braid::frontend {
namespace {

bool InputRole(int role) {
  return role == kRoleUnspecified || role == kRoleSystem || role == kRoleUser ||
         role == kRoleTool;
}

bool OutputRole(int role) {
  return role == kRoleUnspecified || role == kRoleOutput ||
         role == kRoleReasoning;
}

// The API's name of a StreamRole (empty for an unknown one).
const char* RoleApiName(int role) {
  static constexpr const char* kNames[] = {
      "STREAM_ROLE_UNSPECIFIED", "STREAM_ROLE_SYSTEM",    "STREAM_ROLE_USER",
      "STREAM_ROLE_TOOL",        "STREAM_ROLE_REASONING", "STREAM_ROLE_OUTPUT"};
  return role >= 0 && role <= kRoleOutput ? kNames[role] : "";
}

constexpr size_t kMaxStreams = 64;

}  // namespace

absl::Status InvalidField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status UnderField(absl::string_view where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ".", status.message()));
}

// An output stream's visibility (`field`); unspecified is ALL for
// multi-stream models, BRANCH otherwise.
absl::StatusOr<batching::StreamVisibility> Visibility(
    int visibility, bool multi, const std::string& field) {
  switch (visibility) {
    case kVisibilityUnspecified:
      return multi ? batching::StreamVisibility::kAll
                   : batching::StreamVisibility::kBranch;
    case kVisibilityBranch:
      return batching::StreamVisibility::kBranch;
    case kVisibilityAll:
      return batching::StreamVisibility::kAll;
    default:
      return InvalidField(field + ".visibility",
                          absl::StrCat("unknown value ", visibility));
  }
}

// An output stream's sampling, stops and length (`field`), checked as a
// Generate request's after a prefix of `prefix_tokens`.
absl::Status FillStreamSampling(const StreamSpec& spec,
                                const std::string& field,
                                const RequestBuilder& builder,
                                int prefix_tokens,
                                batching::SessionStreamOptions& o,
                                SessionStreamInfo& info) {
  batching::GenerationRequest sampled;
  if (absl::Status s = builder.FillSampling(
          spec.sampling.value_or(SamplingSpec{}), prefix_tokens, &sampled);
      !s.ok()) {
    return UnderField(field, s);
  }
  info.logprobs = sampled.sampling.logprobs;
  batching::TakeSampling(sampled, o);
  return absl::OkStatus();
}

// open.streams[i] (`field`) into out->streams and the stream table; `seen`
// maps the ids so far to their index.
absl::Status BuildStream(const StreamSpec& spec, size_t i,
                         const std::string& field,
                         const RequestBuilder& builder,
                         const ModelStreams& model,
                         absl::flat_hash_map<std::string, int>& seen,
                         batching::SessionOptions* out,
                         std::vector<SessionStreamInfo>* streams) {
  if (spec.stream_id.empty() || spec.stream_id.size() > 64) {
    return InvalidField(field + ".stream_id", "must be 1..64 bytes");
  }
  if (auto [it, added] = seen.emplace(spec.stream_id, i); !added) {
    return InvalidField(
        field + ".stream_id",
        absl::StrCat("\"", spec.stream_id, "\" is already the id of streams[",
                     it->second, "]"));
  }
  batching::SessionStreamOptions o;
  o.name = spec.stream_id;
  SessionStreamInfo info;
  info.id = spec.stream_id;
  switch (spec.kind) {
    case kKindInput:
      o.output = false;
      break;
    case kKindOutput:
    case kKindReasoning:
      o.output = true;
      break;
    default:
      return InvalidField(field + ".kind",
                          "must be INPUT, OUTPUT or REASONING");
  }
  info.output = o.output;
  if (o.output ? !OutputRole(spec.role) : !InputRole(spec.role)) {
    return InvalidField(
        field + ".role",
        absl::StrCat(RoleApiName(spec.role), " does not fit a ",
                     o.output ? "sampled (OUTPUT/REASONING)" : "INPUT",
                     " stream"));
  }
  if (!o.output) {
    if (spec.sampling.has_value()) {
      return InvalidField(field + ".sampling", "is only for OUTPUT streams");
    }
    out->streams.push_back(std::move(o));
    streams->push_back(std::move(info));
    return absl::OkStatus();
  }
  BRAID_ASSIGN_OR_RETURN(o.visibility,
                         Visibility(spec.visibility, model.multi(), field));
  BRAID_RETURN_IF_ERROR(FillStreamSampling(
      spec, field, builder, static_cast<int>(out->prefix.size()), o, info));
  out->streams.push_back(std::move(o));
  streams->push_back(std::move(info));
  return absl::OkStatus();
}

absl::StatusOr<BuiltSession> BuildSession(const SessionOpenSpec& open,
                                          const RequestBuilder& builder,
                                          const ModelStreams& model) {
  BuiltSession built;
  batching::SessionOptions* const out = &built.options;
  std::vector<SessionStreamInfo>* const streams = &built.streams;
  if (open.session_id.size() > 128) {
    return InvalidField("open.session_id", "must be at most 128 bytes");
  }
  out->session_id = open.session_id;
  if (open.tenant.size() > 64) {
    return InvalidField("open.tenant", "must be at most 64 bytes");
  }
  out->tenant = open.tenant;
  if (open.priority < -100 || open.priority > 100) {
    return InvalidField("open.priority", "must be in [-100, 100]");
  }
  out->priority = open.priority;
  BRAID_ASSIGN_OR_RETURN(
      out->tpot_objective,
      TpotObjective(open.tpot_objective_ms, "open.tpot_objective_ms"));
  BRAID_ASSIGN_OR_RETURN(
      out->ttft_objective,
      TtftObjective(open.ttft_objective_ms, "open.ttft_objective_ms"));
  switch (open.duplex_policy) {
    case kDuplexUnspecified:
    case kDuplexInterject:
      out->duplex = batching::DuplexPolicy::kInterject;
      break;
    case kDuplexInterrupt:
      out->duplex = batching::DuplexPolicy::kInterrupt;
      break;
    case kDuplexQueue:
      out->duplex = batching::DuplexPolicy::kQueue;
      break;
    default:
      return InvalidField("open.duplex_policy",
                          absl::StrCat("unknown value ", open.duplex_policy));
  }
  if (!open.prefix.has_value()) {
    return InvalidField("open.prefix",
                        "is required (the shared prompt, at least "
                        "one token)");
  }
  absl::StatusOr<std::vector<int32_t>> prefix =
      builder.PromptTokens(*open.prefix, /*starts_context=*/true);
  if (!prefix.ok()) return UnderField("open.prefix", prefix.status());
  out->prefix = *std::move(prefix);

  if (open.streams.empty()) {
    return InvalidField("open.streams", "must name at least one stream");
  }
  if (open.streams.size() > kMaxStreams) {
    return InvalidField("open.streams",
                        absl::StrCat("at most ", kMaxStreams, " streams"));
  }
  streams->assign(1, SessionStreamInfo{});
  absl::flat_hash_map<std::string, int> seen;
  for (size_t i = 0; i < open.streams.size(); ++i) {
    BRAID_RETURN_IF_ERROR(BuildStream(open.streams[i], i,
                                      absl::StrCat("open.streams[", i, "]"),
                                      builder, model, seen, out, streams));
  }
  // Multi-stream models: the aligned layout, streams bound to model streams
  // (single-stream models keep the linear layout).
  BRAID_RETURN_IF_ERROR(BindModelStreams(open, model, out));
  return built;
}

absl::Status CheckResume(const SessionOpenSpec& open) {
  if (open.session_id.empty()) {
    return InvalidField("open.session_id",
                        "is required with resume (the id of the kept session)");
  }
  if (open.prefix.has_value() || !open.streams.empty() ||
      open.duplex_policy != kDuplexUnspecified || open.priority != 0 ||
      !open.tenant.empty() || open.tpot_objective_ms != 0 ||
      open.ttft_objective_ms != 0) {
    return InvalidField("open",
                        "with resume only session_id may be set: a resumed "
                        "session keeps its prefix, streams and settings");
  }
  return absl::OkStatus();
}

std::vector<SessionStreamInfo> StreamTable(
    const batching::SessionOptions& options) {
  std::vector<SessionStreamInfo> streams(1);
  for (const batching::SessionStreamOptions& o : options.streams) {
    streams.push_back(SessionStreamInfo{
        .id = o.name, .output = o.output, .logprobs = o.sampling.logprobs});
  }
  return streams;
}

}  // namespace braid::frontend
