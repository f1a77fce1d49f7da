#include "server/session_open.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/convert.h"

namespace braid::server {
namespace {

bool InputRole(v1::StreamRole role) {
  return role == v1::STREAM_ROLE_UNSPECIFIED ||
         role == v1::STREAM_ROLE_SYSTEM || role == v1::STREAM_ROLE_USER ||
         role == v1::STREAM_ROLE_TOOL;
}

bool OutputRole(v1::StreamRole role) {
  return role == v1::STREAM_ROLE_UNSPECIFIED ||
         role == v1::STREAM_ROLE_OUTPUT || role == v1::STREAM_ROLE_REASONING;
}

constexpr int kMaxStreams = 64;

}  // namespace

absl::Status InvalidField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status UnderField(absl::string_view where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ".", status.message()));
}

absl::Status BuildSession(const v1::SessionOpen& open,
                          const frontend::RequestBuilder& builder,
                          const ModelStreams& model,
                          batching::SessionOptions* out,
                          std::vector<SessionStreamInfo>* streams) {
  if (open.session_id().size() > 128) {
    return InvalidField("open.session_id", "must be at most 128 bytes");
  }
  out->session_id = open.session_id();
  if (open.tenant().size() > 64) {
    return InvalidField("open.tenant", "must be at most 64 bytes");
  }
  out->tenant = open.tenant();
  if (open.priority() < -100 || open.priority() > 100) {
    return InvalidField("open.priority", "must be in [-100, 100]");
  }
  out->priority = open.priority();
  switch (open.duplex_policy()) {
    case v1::DUPLEX_POLICY_UNSPECIFIED:
    case v1::DUPLEX_POLICY_INTERJECT:
      out->duplex = batching::DuplexPolicy::kInterject;
      break;
    case v1::DUPLEX_POLICY_INTERRUPT:
      out->duplex = batching::DuplexPolicy::kInterrupt;
      break;
    case v1::DUPLEX_POLICY_QUEUE:
      out->duplex = batching::DuplexPolicy::kQueue;
      break;
    default:
      return InvalidField("open.duplex_policy",
                          absl::StrCat("unknown value ", open.duplex_policy()));
  }
  if (!open.has_prefix()) {
    return InvalidField("open.prefix",
                        "is required (the shared prompt, at least "
                        "one token)");
  }
  absl::StatusOr<std::vector<int32_t>> prefix =
      builder.PromptTokens(FromProto(open.prefix()), /*starts_context=*/true);
  if (!prefix.ok()) return UnderField("open.prefix", prefix.status());
  out->prefix = *std::move(prefix);

  if (open.streams().empty()) {
    return InvalidField("open.streams", "must name at least one stream");
  }
  if (open.streams_size() > kMaxStreams) {
    return InvalidField("open.streams",
                        absl::StrCat("at most ", kMaxStreams, " streams"));
  }
  streams->assign(1, SessionStreamInfo{});
  absl::flat_hash_map<std::string, int> seen;
  for (int i = 0; i < open.streams_size(); ++i) {
    const v1::StreamSpec& spec = open.streams(i);
    const std::string field = absl::StrCat("open.streams[", i, "]");
    if (spec.stream_id().empty() || spec.stream_id().size() > 64) {
      return InvalidField(field + ".stream_id", "must be 1..64 bytes");
    }
    if (auto [it, added] = seen.emplace(spec.stream_id(), i); !added) {
      return InvalidField(
          field + ".stream_id",
          absl::StrCat("\"", spec.stream_id(),
                       "\" is already the id of streams[", it->second, "]"));
    }
    batching::SessionStreamOptions o;
    o.name = spec.stream_id();
    SessionStreamInfo info;
    info.id = spec.stream_id();
    switch (spec.kind()) {
      case v1::STREAM_KIND_INPUT:
        o.output = false;
        break;
      case v1::STREAM_KIND_OUTPUT:
      case v1::STREAM_KIND_REASONING:
        o.output = true;
        break;
      default:
        return InvalidField(field + ".kind",
                            "must be INPUT, OUTPUT or REASONING");
    }
    info.output = o.output;
    if (o.output ? !OutputRole(spec.role()) : !InputRole(spec.role())) {
      return InvalidField(
          field + ".role",
          absl::StrCat(v1::StreamRole_Name(spec.role()), " does not fit a ",
                       o.output ? "sampled (OUTPUT/REASONING)" : "INPUT",
                       " stream"));
    }
    if (!o.output) {
      if (spec.has_sampling()) {
        return InvalidField(field + ".sampling", "is only for OUTPUT streams");
      }
      out->streams.push_back(std::move(o));
      streams->push_back(std::move(info));
      continue;
    }
    switch (spec.visibility()) {
      case v1::VISIBILITY_UNSPECIFIED:  // ALL for multi-stream models
        o.visibility = model.multi() ? batching::StreamVisibility::kAll
                                     : batching::StreamVisibility::kBranch;
        break;
      case v1::VISIBILITY_BRANCH:
        o.visibility = batching::StreamVisibility::kBranch;
        break;
      case v1::VISIBILITY_ALL:
        o.visibility = batching::StreamVisibility::kAll;
        break;
      default:
        return InvalidField(field + ".visibility",
                            absl::StrCat("unknown value ", spec.visibility()));
    }
    batching::GenerationRequest sampled;
    if (absl::Status s = builder.FillSampling(
            FromProto(spec.sampling()), static_cast<int>(out->prefix.size()),
            &sampled);
        !s.ok()) {
      return UnderField(field, s);
    }
    o.sampling = sampled.sampling;
    o.max_tokens = sampled.max_tokens;
    o.stop_token_ids = std::move(sampled.stop_token_ids);
    o.stop = std::move(sampled.stop);
    o.ignore_eos = sampled.ignore_eos;
    o.reasoning = sampled.reasoning;
    info.logprobs = sampled.sampling.logprobs;
    out->streams.push_back(std::move(o));
    streams->push_back(std::move(info));
  }
  // Multi-stream models: the aligned layout, streams bound to model streams
  // (single-stream models keep the linear layout).
  return BindModelStreams(open, model, out);
}

absl::Status CheckResume(const v1::SessionOpen& open) {
  if (open.session_id().empty()) {
    return InvalidField("open.session_id",
                        "is required with resume (the id of the kept session)");
  }
  if (open.has_prefix() || !open.streams().empty() ||
      open.duplex_policy() != v1::DUPLEX_POLICY_UNSPECIFIED ||
      open.priority() != 0 || !open.tenant().empty()) {
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

}  // namespace braid::server
