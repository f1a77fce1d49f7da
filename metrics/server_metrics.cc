#include "metrics/server_metrics.h"

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace braid::metrics {
namespace {

const char* RpcLabel(int rpc) {
  static const char* const kNames[] = {
      "Generate", "Tokenize",    "Detokenize",       "GetModelInfo",
      "Session",  "completions", "chat_completions", "models"};
  return kNames[rpc];
}

const char* FrontendLabel(int rpc) {
  return rpc >= static_cast<int>(Rpc::kCompletions) ? "http" : "grpc";
}

const char* CauseLabel(int cause) {
  static const char* const kNames[] = {"client", "deadline", "drain"};
  return kNames[cause];
}

const char* StateLabel(int state) {
  static const char* const kNames[] = {"loading", "serving", "draining",
                                       "stalled"};
  return kNames[state];
}

}  // namespace

const char* StatusCodeName(int code) {
  static const char* const kNames[kNumStatusCodes] = {"OK",
                                                      "CANCELLED",
                                                      "UNKNOWN",
                                                      "INVALID_ARGUMENT",
                                                      "DEADLINE_EXCEEDED",
                                                      "NOT_FOUND",
                                                      "ALREADY_EXISTS",
                                                      "PERMISSION_DENIED",
                                                      "RESOURCE_EXHAUSTED",
                                                      "FAILED_PRECONDITION",
                                                      "ABORTED",
                                                      "OUT_OF_RANGE",
                                                      "UNIMPLEMENTED",
                                                      "INTERNAL",
                                                      "UNAVAILABLE",
                                                      "DATA_LOSS",
                                                      "UNAUTHENTICATED"};
  return code >= 0 && code < kNumStatusCodes ? kNames[code] : "UNKNOWN";
}

ServerMetrics::ServerMetrics(prometheus::Registry& r,
                             const std::string& version)
    : registry_(r) {
  rpcs_ = &prometheus::BuildCounter()
               .Name("braid_rpcs_total")
               .Help(
                   "Finished requests by front end (grpc: braid.v1.Braid "
                   "RPCs; http: the OpenAI-compatible API), method and "
                   "status code (gRPC names; errors are code != \"OK\").")
               .Register(r);
  // Every (method, code) series exists from the start, at 0, so rates and
  // ratios read 0 rather than nothing; 8 x 17 series.
  for (int m = 0; m < kNumRpcs; ++m) {
    for (int c = 0; c < kNumStatusCodes; ++c) {
      rpc_children_[m][c] = &rpcs_->Add({{"frontend", FrontendLabel(m)},
                                         {"method", RpcLabel(m)},
                                         {"code", StatusCodeName(c)}});
    }
  }
  auto& cancellations = prometheus::BuildCounter()
                            .Name("braid_cancellations_total")
                            .Help(
                                "Generation requests cancelled, by cause: "
                                "client, deadline or drain.")
                            .Register(r);
  for (int c = 0; c < kNumCancelCauses; ++c) {
    cancellations_[c] = &cancellations.Add({{"cause", CauseLabel(c)}});
  }
  open_sessions_ = &prometheus::BuildGauge()
                        .Name("braid_sessions_open")
                        .Help(
                            "Open sessions: Session calls plus Generate "
                            "streams in flight (each a one-shot session).")
                        .Register(r)
                        .Add({});
  auto& state = prometheus::BuildGauge()
                    .Name("braid_server_state")
                    .Help(
                        "1 for the daemon's current state: loading, "
                        "serving, draining, or stalled (an engine step "
                        "over --step_watchdog_seconds).")
                    .Register(r);
  for (int s = 0; s < kNumServerStates; ++s)
    state_[s] = &state.Add({{"state", StateLabel(s)}});
  SetState(ServerState::kLoading);
  resident_bytes_ = &prometheus::BuildGauge()
                         .Name("process_resident_memory_bytes")
                         .Help("Resident memory of braidd, in bytes.")
                         .Register(r)
                         .Add({});
  stalls_ = &prometheus::BuildCounter()
                 .Name("braid_engine_stalls_total")
                 .Help(
                     "Engine steps that ran longer than "
                     "--step_watchdog_seconds.")
                 .Register(r)
                 .Add({});
  prometheus::BuildGauge()
      .Name("braid_build_info")
      .Help("Always 1; the labels describe the braidd build.")
      .Register(r)
      .Add({{"version", version}})
      .Set(1);
}

void ServerMetrics::RecordRpc(Rpc rpc, int code) {
  if (code < 0 || code >= kNumStatusCodes) code = 2;  // UNKNOWN
  rpc_children_[static_cast<int>(rpc)][code]->Increment();
}

void ServerMetrics::RecordCancellation(CancelCause cause) {
  cancellations_[static_cast<int>(cause)]->Increment();
}

void ServerMetrics::SessionOpened() { open_sessions_->Increment(); }

void ServerMetrics::SessionClosed() { open_sessions_->Decrement(); }

void ServerMetrics::RecordStall() { stalls_->Increment(); }

void ServerMetrics::SetResidentBytes(int64_t bytes) {
  resident_bytes_->Set(static_cast<double>(bytes));
}

void ServerMetrics::SetState(ServerState state) {
  for (int s = 0; s < kNumServerStates; ++s) {
    state_[s]->Set(s == static_cast<int>(state) ? 1 : 0);
  }
}

void ServerMetrics::SetModelInfo(const ModelInfo& info) {
  prometheus::BuildGauge()
      .Name("braid_model_info")
      .Help("Always 1; the labels describe the served model.")
      .Register(registry_)
      .Add({{"model_name", info.name},
            {"architecture", info.architecture},
            {"backend", info.backend},
            {"context_length", std::to_string(info.context_length)}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("braid_kv_cache_info")
      .Help(
          "Always 1; the labels give the KV cache's block size (tokens) "
          "and block count.")
      .Register(registry_)
      .Add({{"block_size", std::to_string(info.kv_block_size)},
            {"num_blocks", std::to_string(info.kv_num_blocks)}})
      .Set(1);
}

}  // namespace braid::metrics
