// braidd's command line: every flag is defined in flags.cc and read once,
// after parsing, into one DaemonFlags value that the composition root
// (main.cc) hands to the parts it builds.
#ifndef BRAID_SERVER_FLAGS_H_
#define BRAID_SERVER_FLAGS_H_

#include <cstdint>
#include <string>

#include "server/credentials.h"
#include "server/engine_config.h"
#include "server/limits.h"

namespace braid::server {

// The OpenAI-compatible HTTP front end (openai/http_server.h).
struct HttpFlags {
  std::string listen;  // empty: off
  std::string port_file;
  int threads = 64;
  int64_t max_body_bytes = 4 << 20;
  int header_timeout_seconds = 10;
  std::string served_model_name;  // empty: the file's stem
};

// The HAProxy agent check (server/agent_check.h).
struct AgentCheckFlags {
  std::string listen;  // empty: off
  std::string port_file;
  double reference_capacity = 100;
};

struct DaemonFlags {
  // The model.
  std::string model_path;       // --model, else $BRAID_MODEL; empty: none
  std::string chat_template;    // --chat_template: a family or a Jinja file
  std::string device = "auto";  // --device: cpu | auto | cuda[:N]
  double gpu_memory_fraction = 0.9;  // of free device memory for the KV cache
  bool cuda_graphs = true;           // decode steps replay CUDA graphs
  bool cuda_pdl = false;             // programmatic dependent launch
  int threads = 0;                   // 0: one a hardware thread
  bool packed_matmul = false;
  int context_length = 4096;  // capped by the model's training context
  // The engine (context_length is set once the model is loaded).
  EngineFlags engine;
  std::string queue_policy;
  // The gRPC server.
  std::string listen;
  TlsFlags tls;
  ServerLimits limits;
  bool reflection = false;
  std::string auth_token_file;  // empty: no authentication
  int drain_grace_seconds = 30;
  int drain_notice_seconds = 0;
  int step_watchdog_seconds = 60;  // 0: off
  AgentCheckFlags agent_check;
  int max_request_seconds = 600;  // 0: no limit
  HttpFlags http;
  // Observability and tests.
  std::string metrics_listen;  // empty: no /metrics endpoint
  std::string stats_file, port_file, metrics_port_file;
  int debug_load_delay_ms = 0;
};

// The parsed command line (absl::ParseCommandLine has run).
DaemonFlags ReadFlags();

// --help (braidd's own flags), --version and the usage message; call
// before absl::ParseCommandLine.
void ConfigureUsage(const char* version);

}  // namespace braid::server

#endif  // BRAID_SERVER_FLAGS_H_
