// The gRPC server's metrics: finished RPCs by method and status code (the
// errors panel reads the non-OK ones), cancellations by cause, open
// sessions, the daemon's state, and the build and model info series.
//
// Label values come from fixed sets (method names, the 17 gRPC status code
// names, causes, states); model info labels come from the operator's model
// file, never from a request. Built on a registry that outlives it.
// Thread-safe.
#ifndef BRAID_METRICS_SERVER_METRICS_H_
#define BRAID_METRICS_SERVER_METRICS_H_

#include <array>
#include <string>

namespace prometheus {
class Counter;
class Gauge;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace braid::metrics {

// The gRPC service's methods, then the HTTP front end's endpoints (label
// frontend="grpc" or "http").
enum class Rpc {
  kGenerate = 0,
  kTokenize,
  kDetokenize,
  kGetModelInfo,
  kSession,
  kCompletions,      // POST /v1/completions
  kChatCompletions,  // POST /v1/chat/completions
  kModels,           // GET /v1/models
};
inline constexpr int kNumRpcs = 8;
inline constexpr int kNumStatusCodes = 17;  // grpc::StatusCode 0..16
// "OK", "CANCELLED", ... "UNAUTHENTICATED"; "UNKNOWN" out of range.
const char* StatusCodeName(int code);

enum class CancelCause {
  kClient = 0,  // the client cancelled or disconnected
  kDeadline,    // the client's deadline or --max_request_seconds passed
  kDrain,       // still running when the drain grace period ended
};
inline constexpr int kNumCancelCauses = 3;

// kStalled: an engine step is over --step_watchdog_seconds.
enum class ServerState { kLoading = 0, kServing, kDraining, kStalled };
inline constexpr int kNumServerStates = 4;

struct ModelInfo {
  std::string name;          // general.name of the GGUF file
  std::string architecture;  // general.architecture
  std::string backend;       // "cpu", "cuda"
  int context_length = 0;
  // The KV cache's shape (braid_kv_cache_info), for routers that weigh KV
  // usage by capacity (vLLM's cache_config_info).
  int kv_block_size = 0;
  int kv_num_blocks = 0;
};

class ServerMetrics {
 public:
  ServerMetrics(prometheus::Registry& registry, const std::string& version);

  // Every finished RPC of braid.v1.Braid (a Session call when it ends) and
  // HTTP request; `code` is a grpc::StatusCode (absl::StatusCode: the same
  // numbers).
  void RecordRpc(Rpc rpc, int code);
  void RecordCancellation(CancelCause cause);
  void SessionOpened();
  void SessionClosed();
  void SetState(ServerState state);
  // The watchdog saw a step over its bound (once per stuck step).
  void RecordStall();
  void SetModelInfo(const ModelInfo& info);
  // The process's resident memory (process_resident_memory_bytes).
  void SetResidentBytes(int64_t bytes);

 private:
  prometheus::Registry& registry_;
  prometheus::Family<prometheus::Counter>* rpcs_;
  std::array<std::array<prometheus::Counter*, kNumStatusCodes>, kNumRpcs>
      rpc_children_;
  std::array<prometheus::Counter*, kNumCancelCauses> cancellations_;
  prometheus::Gauge* open_sessions_;
  prometheus::Gauge* resident_bytes_;
  std::array<prometheus::Gauge*, kNumServerStates> state_;
  prometheus::Counter* stalls_;
};

}  // namespace braid::metrics

#endif  // BRAID_METRICS_SERVER_METRICS_H_
