// braidd: serves a GGUF model over gRPC and, with --http_listen, the
// OpenAI-compatible HTTP API. The composition root: it reads the
// flags (flags.h) and wires the parts together; each part lives in its own
// file.
//
// Lifecycle: listen first (health NOT_SERVING, every braid RPC UNAVAILABLE),
// load the model, serve (health SERVING), and on SIGTERM or SIGINT drain:
// health NOT_SERVING, new RPCs UNAVAILABLE, open streams get
// --drain_grace_seconds to finish, the rest end with UNAVAILABLE, exit 0.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "frontend/auth.h"
#include "frontend/load_report.h"
#include "metrics/engine_metrics.h"
#include "metrics/exporter.h"
#include "metrics/server_metrics.h"
#include "openai/http_server.h"
#include "queues/work_queues.h"
#include "server/agent_check.h"
#include "server/engine_config.h"
#include "server/flags.h"
#include "server/grpc_server.h"
#include "server/load_model.h"
#include "server/service.h"
#include "server/stats.h"
#include "server/watchdog.h"

namespace braid {
namespace {

std::atomic<int> g_signals{0};

void OnSignal(int) { g_signals.fetch_add(1); }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "braidd: %s\n", std::string(status.message()).c_str());
  return 1;
}

// The metrics endpoint (first: it reports the loading state), or a registry
// nobody scrapes.
absl::StatusOr<std::unique_ptr<metrics::Exporter>> StartMetrics(
    const server::DaemonFlags& flags) {
  if (flags.metrics_listen.empty()) {
    return std::make_unique<metrics::Exporter>();
  }
  auto served = metrics::Exporter::Serve(flags.metrics_listen);
  if (!served.ok()) return served.status();
  server::WritePortFile(flags.metrics_port_file, (*served)->port());
  return served;
}

// The HTTP front end when --http_listen is set (null otherwise); it answers
// 503 until the model is loaded.
absl::StatusOr<std::unique_ptr<openai::HttpServer>> StartHttp(
    const server::DaemonFlags& flags, const frontend::TokenAuthenticator* auth,
    metrics::ServerMetrics* metrics) {
  if (flags.http.listen.empty()) return nullptr;
  openai::HttpOptions o;
  o.listen = flags.http.listen;
  o.threads = flags.http.threads;
  o.max_body_bytes = flags.http.max_body_bytes;
  o.header_timeout = absl::Seconds(flags.http.header_timeout_seconds);
  o.auth = auth;
  o.metrics = metrics;
  if (flags.max_request_seconds > 0) {
    o.max_request_duration = absl::Seconds(flags.max_request_seconds);
  }
  auto http = openai::HttpServer::Start(std::move(o));
  if (!http.ok()) return http.status();
  server::WritePortFile(flags.http.port_file, (*http)->port());
  return http;
}

// The HAProxy agent check when --agent_check_listen is set (null
// otherwise); it answers "down" until the model is loaded.
absl::StatusOr<std::unique_ptr<server::AgentCheckServer>> StartAgentCheck(
    const server::DaemonFlags& flags, const frontend::LoadTracker* load) {
  if (flags.agent_check.listen.empty()) return nullptr;
  auto agent = server::AgentCheckServer::Start(flags.agent_check.listen, load);
  if (!agent.ok()) return agent.status();
  server::WritePortFile(flags.agent_check.port_file, (*agent)->port());
  return agent;
}

// What the balancers and probes see: gRPC health, /health, the agent
// check's reply and braid_server_state.
struct Health {
  grpc::Server* grpc;
  openai::HttpServer* http;  // null: no HTTP front end
  frontend::LoadTracker* load;
  metrics::ServerMetrics* metrics;

  void Set(frontend::ReplicaState state) const {
    const bool serving = state == frontend::ReplicaState::kServing;
    server::SetHealth(grpc, serving);
    if (http != nullptr) {
      http->SetUnhealthy(state == frontend::ReplicaState::kStalled ? "stalled"
                         : serving                                 ? nullptr
                                   : "draining");
    }
    load->SetState(state);
    metrics->SetState(state == frontend::ReplicaState::kStalled
                          ? metrics::ServerState::kStalled
                      : serving ? metrics::ServerState::kServing
                                : metrics::ServerState::kDraining);
  }
};

// Logs and reports the watchdog's verdict.
void OnWatchdog(const server::StepWatchdog& watchdog,
                server::StepWatchdog::Change change, int bound_seconds,
                const Health& health) {
  if (change == server::StepWatchdog::Change::kNone) return;
  const double seconds = absl::ToDoubleSeconds(watchdog.stuck_for());
  if (change == server::StepWatchdog::Change::kStalled) {
    std::fprintf(stderr,
                 "braidd: an engine step has run for %.1f s (over "
                 "--step_watchdog_seconds=%d): reporting NOT_SERVING until "
                 "steps flow again\n",
                 seconds, bound_seconds);
    health.metrics->RecordStall();
    health.Set(frontend::ReplicaState::kStalled);
  } else {
    std::fprintf(stderr,
                 "braidd: engine steps flow again (the stuck step ran for at "
                 "least %.1f s); serving\n",
                 seconds);
    health.Set(frontend::ReplicaState::kServing);
  }
}

// The model's id in the HTTP API: --served_model_name, else the file's name
// without .gguf.
std::string ServedModelName(const server::DaemonFlags& flags) {
  if (!flags.http.served_model_name.empty()) {
    return flags.http.served_model_name;
  }
  std::string name = flags.model_path.substr(flags.model_path.rfind('/') + 1);
  const std::string ext = ".gguf";
  if (name.size() > ext.size() &&
      name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
    name.resize(name.size() - ext.size());
  }
  return name;
}

// The bearer tokens when --auth_token_file is set (null otherwise).
absl::StatusOr<std::unique_ptr<frontend::TokenAuthenticator>> LoadAuth(
    const server::DaemonFlags& flags) {
  if (flags.auth_token_file.empty()) return nullptr;
  return frontend::TokenAuthenticator::FromFile(flags.auth_token_file);
}

// braid_model_info and braid_kv_cache_info.
metrics::ModelInfo ModelInfoOf(const server::LoadedModel& loaded,
                               const batching::SchedulerOptions& scheduler) {
  const model::ModelInfo& info = loaded.model->info();
  return {.name = info.name,
          .architecture = info.architecture,
          .backend = info.backend,
          .context_length = loaded.info.context_length,
          .kv_block_size = scheduler.block_size,
          .kv_num_blocks = scheduler.num_blocks};
}

// The gRPC service's options from the flags.
server::ServiceOptions ServiceOptionsOf(
    const server::DaemonFlags& flags, const frontend::TokenAuthenticator* auth,
    const frontend::LoadTracker* load, metrics::ServerMetrics* metrics) {
  server::ServiceOptions o;
  o.auth = auth;
  o.load = load;
  o.metrics = metrics;
  if (flags.max_request_seconds > 0) {
    o.max_request_duration = absl::Seconds(flags.max_request_seconds);
  }
  return o;
}

// What the HTTP front end serves once the model is loaded.
openai::HttpBackend HttpBackendOf(const server::DaemonFlags& flags,
                                  const server::LoadedModel& loaded,
                                  batching::Engine* engine,
                                  absl::Time load_start) {
  openai::HttpBackend backend;
  backend.model_id = ServedModelName(flags);
  backend.aliases = {loaded.model->info().name, flags.model_path};
  backend.created = absl::ToUnixSeconds(load_start);
  backend.tokenizer = loaded.tokenizer.get();
  backend.chat_template = loaded.chat_template.get();
  backend.engine = engine;
  backend.context_length = loaded.info.context_length;
  return backend;
}

// Every 100 ms until a signal, then through --drain_notice_seconds (health
// already NOT_SERVING) or until a second signal: the gauges, the load
// report, the watchdog, --stats_file and the token file's reload.
void ServeUntilDrain(const server::DaemonFlags& flags, batching::Engine& engine,
                     metrics::EngineMetrics& engine_metrics,
                     const Health& health, frontend::TokenAuthenticator* auth) {
  server::StepWatchdog watchdog(absl::Seconds(flags.step_watchdog_seconds));
  absl::Time drain_at = absl::InfiniteFuture();
  while (absl::Now() < drain_at && g_signals.load() < 2) {
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time now = absl::Now();
    if (g_signals.load() > 0 && drain_at == absl::InfiniteFuture()) {
      drain_at = now + absl::Seconds(flags.drain_notice_seconds);
      health.Set(frontend::ReplicaState::kDraining);
      if (flags.drain_notice_seconds > 0) {
        std::fprintf(stderr,
                     "braidd: draining in %d s (--drain_notice_seconds); "
                     "health NOT_SERVING, still serving\n",
                     flags.drain_notice_seconds);
      }
    }
    const batching::EngineStats stats = engine.Stats();
    engine_metrics.SetGauges(server::ToGauges(stats));
    health.metrics->SetResidentBytes(server::ResidentBytes());
    health.load->Observe(stats, now);
    if (drain_at == absl::InfiniteFuture()) {
      OnWatchdog(watchdog, watchdog.Check(stats, now),
                 flags.step_watchdog_seconds, health);
    }
    if (!flags.stats_file.empty()) {
      server::WriteStatsFile(flags.stats_file, stats);
    }
    if (auth != nullptr) {
      if (absl::Status s = auth->ReloadIfChanged(); !s.ok()) {
        std::fprintf(stderr, "braidd: token file not reloaded: %s\n",
                     std::string(s.message()).c_str());
      }
    }
  }
}

int Run(const server::DaemonFlags& flags) {
  if (flags.model_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "no model: pass --model=PATH.gguf or set BRAID_MODEL"));
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto exporter = StartMetrics(flags);
  if (!exporter.ok()) return Fail(exporter.status());
  metrics::ServerMetrics server_metrics((*exporter)->registry(), BRAID_VERSION);
  auto auth = LoadAuth(flags);
  if (!auth.ok()) return Fail(auth.status());
  frontend::LoadTracker load(
      {.max_num_seqs = flags.engine.max_num_seqs,
       .reference_capacity = flags.agent_check.reference_capacity});
  auto agent = StartAgentCheck(flags, &load);
  if (!agent.ok()) return Fail(agent.status());
  server::BraidService service(
      ServiceOptionsOf(flags, auth->get(), &load, &server_metrics));
  auto server = server::StartGrpcServer(&service, flags);
  if (!server.ok()) return Fail(server.status());
  auto http = StartHttp(flags, auth->get(), &server_metrics);
  if (!http.ok()) return Fail(http.status());

  const absl::Time load_start = absl::Now();
  absl::SleepFor(absl::Milliseconds(flags.debug_load_delay_ms));
  auto loaded = server::LoadModel(flags);
  if (!loaded.ok()) return Fail(loaded.status());
  const model::ModelInfo& info = loaded->model->info();
  server::EngineFlags engine_flags = flags.engine;
  engine_flags.context_length = loaded->info.context_length;
  if (loaded->kv_budget_tokens > 0) {
    engine_flags.kv_budget_tokens = loaded->kv_budget_tokens;
  }
  auto engine_options = server::MakeEngineOptions(
      engine_flags,
      [&](int block_size) { return loaded->model->KvBlockBytes(block_size); },
      loaded->tokenizer.get());
  if (!engine_options.ok()) return Fail(engine_options.status());
  engine_options->scheduler.lookahead_slots = loaded->lookahead_slots;
  auto policy = queues::ParseQueuePolicy(flags.queue_policy);
  if (!policy.ok()) return Fail(policy.status());
  metrics::EngineMetrics engine_metrics((*exporter)->registry());
  batching::ModelExecutor executor(loaded->model.get(),
                                   engine_options->scheduler.block_size,
                                   engine_options->scheduler.num_blocks);
  batching::Engine engine(&executor, loaded->tokenizer.get(), *engine_options,
                          queues::MakeWorkQueues(*policy), &engine_metrics);
  std::fprintf(stderr, "braidd: KV cache: %d blocks of %d tokens (%.1f MiB)\n",
               engine_options->scheduler.num_blocks,
               engine_options->scheduler.block_size,
               executor.kv_cache().bytes() / (1024.0 * 1024.0));
  service.SetReady(info, loaded->tokenizer.get(), loaded->chat_template.get(),
                   &engine, loaded->info);
  if (*http != nullptr) {
    (*http)->SetReady(HttpBackendOf(flags, *loaded, &engine, load_start));
  }
  server_metrics.SetModelInfo(ModelInfoOf(*loaded, engine_options->scheduler));
  const Health health{server->get(), http->get(), &load, &server_metrics};
  health.Set(frontend::ReplicaState::kServing);
  std::fprintf(stderr,
               "braidd: loaded %s (%s, %d layers, vocab %d) in %.2f s; "
               "serving\n",
               flags.model_path.c_str(), info.architecture.c_str(),
               info.n_layer, loaded->tokenizer->vocab_size(),
               absl::ToDoubleSeconds(absl::Now() - load_start));

  ServeUntilDrain(flags, engine, engine_metrics, health, auth->get());
  server::Drain(server->get(), service, http->get(), server_metrics,
                flags.drain_grace_seconds,
                [] { return g_signals.load() >= 2; });
  engine.Shutdown();
  std::fprintf(stderr, "braidd: engine: %s\n",
               server::StatsJson(engine.Stats()).c_str());
  if (!flags.stats_file.empty()) {
    server::WriteStatsFile(flags.stats_file, engine.Stats());
  }
  std::fprintf(stderr, "braidd: stopped\n");
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::server::ConfigureUsage(BRAID_VERSION);
  absl::ParseCommandLine(argc, argv);
  return braid::Run(braid::server::ReadFlags());
}
