// braidd: serves a GGUF model over gRPC.
//
// Lifecycle: listen first (health NOT_SERVING, every braid RPC UNAVAILABLE),
// load the model, serve (health SERVING), and on SIGTERM or SIGINT drain:
// health NOT_SERVING, new RPCs UNAVAILABLE, open streams get
// --drain_grace_seconds to finish, the rest end with UNAVAILABLE, exit 0.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "metrics/engine_metrics.h"
#include "metrics/exporter.h"
#include "metrics/server_metrics.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "server/auth.h"
#include "server/credentials.h"
#include "server/engine_config.h"
#include "server/limits.h"
#include "server/service.h"
#include "streams/work_queues.h"

// -- model and engine --------------------------------------------------------
ABSL_FLAG(std::string, model, "",
          "Path of the GGUF model to serve (default: $BRAID_MODEL).");
ABSL_FLAG(int, threads, 0,
          "CPU threads for the model (0 = one per hardware thread).");
ABSL_FLAG(
    bool, packed_matmul, false,
    "Matrix products on weights repacked at load (AVX-512 + VNNI CPUs): "
    "~2-2.4x faster products, deterministic and batch-invariant, but "
    "logits no longer bit-identical to llama.cpp's (docs/ARCHITECTURE.md).");
ABSL_FLAG(int, context_length, 4096,
          "Tokens per sequence (prompt plus output); capped at the model's "
          "trained context length.");
ABSL_FLAG(int, kv_budget_mb, 512,
          "Memory for the paged KV cache, in MiB; sets the number of blocks "
          "(reserved at start, committed as blocks are first written).");
ABSL_FLAG(int, kv_budget_tokens, 0,
          "If > 0, size the KV cache for this many tokens instead of "
          "--kv_budget_mb.");
ABSL_FLAG(int, block_size, 16, "Tokens per KV cache block.");
ABSL_FLAG(int, max_batch_tokens, 512,
          "Tokens per engine step (decode tokens plus prefill chunks).");
ABSL_FLAG(int, max_prefill_tokens_while_decoding, 64,
          "Stream isolation: while requests decode, a step takes at most "
          "max(this, --prefill_tokens_per_decode_token x its decode tokens) "
          "prompt tokens, so a long prompt slows other streams' tokens by a "
          "bounded factor (0 = off: prompts take up to --max_batch_tokens).");
ABSL_FLAG(int, prefill_tokens_per_decode_token, 4,
          "See --max_prefill_tokens_while_decoding.");
ABSL_FLAG(double, max_decode_slowdown, 1.5,
          "Stream isolation: while requests decode, prompt tokens per step "
          "are further limited so a step takes at most this many times a "
          "decode-only step, by measured step times (at least 1 prompt "
          "token per step; <= 1 = off).");
ABSL_FLAG(int, max_num_seqs, 64,
          "Sequences per engine step, and requests holding KV blocks at once.");
ABSL_FLAG(int, max_running, 0, "Deprecated alias of --max_num_seqs.");
ABSL_FLAG(int, max_waiting_requests, 256,
          "Requests that may wait to start; beyond it RESOURCE_EXHAUSTED.");
ABSL_FLAG(
    int64_t, max_waiting_tokens, 262144,
    "Prompt tokens that may wait to start; beyond it RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, queue_policy, "fair",
          "Ordering inside each work queue: fifo, priority or fair "
          "(priority, then per-tenant fair share, then arrival).");
ABSL_FLAG(double, io_share, 0.5,
          "Guaranteed share of each step for the I/O queue (visible output).");
ABSL_FLAG(double, reasoning_share, 0.25,
          "Guaranteed share of each step for the reasoning queue.");
ABSL_FLAG(double, prompt_share, 0.25,
          "Guaranteed share of each step for the prompt queue (prefill).");
ABSL_FLAG(std::string, think_start, "",
          "The model's start-of-thinking marker (one token, e.g. <think>); "
          "decode work between the markers goes to the reasoning queue.");
ABSL_FLAG(std::string, think_end, "",
          "The model's end-of-thinking marker (one token, e.g. </think>).");

// -- sessions ----------------------------------------------------------------
ABSL_FLAG(int, session_idle_timeout_s, 300,
          "A Session with no client action and nothing generating for this "
          "long is kept (as by close with keep) and its call ends with "
          "DEADLINE_EXCEEDED; the client may resume it (0 = never).");
ABSL_FLAG(int, max_sessions_per_client, 16,
          "Open Sessions per client (its bearer token, or its address "
          "without authentication); beyond it RESOURCE_EXHAUSTED (0 = no "
          "limit).");
ABSL_FLAG(int, max_kept_sessions, 64,
          "Sessions kept for resume (close with keep, idle timeout); the "
          "least recently kept are dropped first. Their KV blocks are free, "
          "evictable cache (0 = keep none).");

// -- serving -----------------------------------------------------------------
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve gRPC on (host:port; port 0 picks a free port). "
          "A non-loopback address needs --tls_cert_file/--tls_key_file or "
          "--allow_insecure.");
ABSL_FLAG(bool, allow_insecure, false,
          "Serve plaintext on a non-loopback --listen address (for example "
          "behind a mesh that terminates TLS).");
ABSL_FLAG(std::string, tls_cert_file, "",
          "Server certificate chain (PEM); with --tls_key_file turns on "
          "TLS. Reloaded when the file changes.");
ABSL_FLAG(std::string, tls_key_file, "",
          "Private key of --tls_cert_file (PEM).");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "CA bundle (PEM) for client certificates: mutual TLS, every "
          "client must present a certificate it signed.");
ABSL_FLAG(int, tls_reload_seconds, 60,
          "How often the TLS files are checked for changes.");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer tokens, one per line: `TOKEN [generate,tokenize,"
          "detokenize,info]`. Calls must send `authorization: Bearer "
          "TOKEN`. Re-read when it changes. Empty: no authentication.");
ABSL_FLAG(int, drain_grace_seconds, 30,
          "On SIGTERM, how long open streams may run before they are ended "
          "with UNAVAILABLE; a second signal ends them at once.");
ABSL_FLAG(int, max_request_seconds, 600,
          "Generate requests end with DEADLINE_EXCEEDED after this long "
          "(0 = no limit); clients' shorter deadlines apply too.");
ABSL_FLAG(int, max_receive_message_bytes, 4 << 20,
          "Largest request message; larger ones get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_send_message_bytes, 4 << 20, "Largest response message.");
ABSL_FLAG(int, max_concurrent_streams, 100,
          "Concurrent calls per client connection (HTTP/2 streams); more "
          "wait in the client.");
ABSL_FLAG(int, keepalive_time_seconds, 60,
          "Ping a connection idle this long to detect dead clients.");
ABSL_FLAG(int, keepalive_timeout_seconds, 20,
          "Close a connection whose ping is not answered within this long.");
ABSL_FLAG(int, keepalive_min_ping_interval_seconds, 10,
          "Clients pinging more often than this get a strike.");
ABSL_FLAG(int, keepalive_max_ping_strikes, 2,
          "Strikes before a client's connection is closed with GOAWAY "
          "too_many_pings (0 = unlimited).");
ABSL_FLAG(bool, keepalive_permit_without_calls, false,
          "Let clients ping connections with no call in flight.");
ABSL_FLAG(bool, reflection, false, "Enable gRPC server reflection.");

// -- observability -----------------------------------------------------------
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Serve Prometheus metrics at http://ADDRESS/metrics (host:port; "
          "port 0 picks a free port; empty = off).");
ABSL_FLAG(bool, metrics_vllm_names, false,
          "Also export vllm:num_requests_waiting, vllm:num_requests_running "
          "and vllm:kv_cache_usage_perc for the Gateway API inference "
          "extension's endpoint picker.");
ABSL_FLAG(std::string, stats_file, "",
          "If set, write the engine's counters here as JSON about every "
          "100 ms (for tests and operators).");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound gRPC port here once listening (before "
          "the model is loaded; for tests that listen on port 0).");
ABSL_FLAG(std::string, metrics_port_file, "",
          "If set, write the bound metrics port here.");
ABSL_FLAG(int, debug_load_delay_ms, 0,
          "For tests: wait this long before loading the model.");

namespace braid {
namespace {

constexpr char kServiceName[] = "braid.v1.Braid";

std::atomic<int> g_signals{0};

void OnSignal(int) { g_signals.fetch_add(1); }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "braidd: %s\n", std::string(status.message()).c_str());
  return 1;
}

void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d\n", port);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

// Everything loaded from the GGUF file.
struct LoadedModel {
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<model::ChatTemplate> chat_template;
  std::unique_ptr<model::LlamaModel> llama;
  server::ServiceInfo info;
};

absl::StatusOr<LoadedModel> LoadModel(const std::string& path) {
  LoadedModel m;
  auto file = model::GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto tokenizer_data = model::TokenizerDataFromGguf(**file);
  if (!tokenizer_data.ok()) return tokenizer_data.status();
  auto tokenizer = model::Tokenizer::Create(*std::move(tokenizer_data));
  if (!tokenizer.ok()) return tokenizer.status();
  m.tokenizer = *std::move(tokenizer);
  if (auto source = (*file)->GetString("tokenizer.chat_template");
      source.ok()) {
    auto t = model::ChatTemplate::FromSource(
        *source, m.tokenizer->TokenBytes(m.tokenizer->bos_id()),
        m.tokenizer->TokenBytes(m.tokenizer->eos_id()));
    if (t.ok()) {
      m.chat_template = std::make_unique<model::ChatTemplate>(*std::move(t));
      m.info.chat_template_name = std::string(m.chat_template->name());
    } else {
      std::fprintf(stderr, "braidd: chat prompts disabled: %s\n",
                   std::string(t.status().message()).c_str());
    }
  }
  model::LoadOptions load_options;
  load_options.num_threads = absl::GetFlag(FLAGS_threads);
  load_options.packed_matmul = absl::GetFlag(FLAGS_packed_matmul);
  auto llama = model::LlamaModel::Load(*std::move(file), load_options);
  if (!llama.ok()) return llama.status();
  m.llama = *std::move(llama);
  m.info.model_path = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) m.info.file_size_bytes = st.st_size;
  m.info.context_length = std::min<int>(absl::GetFlag(FLAGS_context_length),
                                        m.llama->config().n_ctx_train);
  m.info.num_threads =
      load_options.num_threads > 0
          ? load_options.num_threads
          : static_cast<int>(std::thread::hardware_concurrency());
  return m;
}

server::EngineFlags EngineFlagsFromCommandLine(int context_length) {
  server::EngineFlags flags;
  flags.kv_budget_mb = absl::GetFlag(FLAGS_kv_budget_mb);
  flags.kv_budget_tokens = absl::GetFlag(FLAGS_kv_budget_tokens);
  flags.block_size = absl::GetFlag(FLAGS_block_size);
  flags.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  flags.max_prefill_tokens_while_decoding =
      absl::GetFlag(FLAGS_max_prefill_tokens_while_decoding);
  flags.prefill_tokens_per_decode_token =
      absl::GetFlag(FLAGS_prefill_tokens_per_decode_token);
  flags.max_decode_slowdown = absl::GetFlag(FLAGS_max_decode_slowdown);
  flags.max_num_seqs = absl::GetFlag(FLAGS_max_running) > 0
                           ? absl::GetFlag(FLAGS_max_running)
                           : absl::GetFlag(FLAGS_max_num_seqs);
  flags.max_waiting_requests = absl::GetFlag(FLAGS_max_waiting_requests);
  flags.max_waiting_tokens = absl::GetFlag(FLAGS_max_waiting_tokens);
  flags.queue_shares = {absl::GetFlag(FLAGS_io_share),
                        absl::GetFlag(FLAGS_reasoning_share),
                        absl::GetFlag(FLAGS_prompt_share)};
  flags.think_start = absl::GetFlag(FLAGS_think_start);
  flags.think_end = absl::GetFlag(FLAGS_think_end);
  flags.context_length = context_length;
  flags.session_idle_timeout_s = absl::GetFlag(FLAGS_session_idle_timeout_s);
  flags.max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client);
  flags.max_kept_sessions = absl::GetFlag(FLAGS_max_kept_sessions);
  return flags;
}

server::ServerLimits LimitsFromCommandLine() {
  server::ServerLimits l;
  l.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  l.max_send_message_bytes = absl::GetFlag(FLAGS_max_send_message_bytes);
  l.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  l.keepalive_time_seconds = absl::GetFlag(FLAGS_keepalive_time_seconds);
  l.keepalive_timeout_seconds = absl::GetFlag(FLAGS_keepalive_timeout_seconds);
  l.keepalive_min_ping_interval_seconds =
      absl::GetFlag(FLAGS_keepalive_min_ping_interval_seconds);
  l.keepalive_max_ping_strikes =
      absl::GetFlag(FLAGS_keepalive_max_ping_strikes);
  l.keepalive_permit_without_calls =
      absl::GetFlag(FLAGS_keepalive_permit_without_calls);
  return l;
}

// Linking gRPC's reflection library registers its plugin in every server
// builder; this option takes it out again unless --reflection.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

void SetHealth(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

// Starts the gRPC server (the model is not loaded yet: NOT_SERVING).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    server::BraidService* service) {
  server::TlsFlags tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  tls.reload_seconds = absl::GetFlag(FLAGS_tls_reload_seconds);
  tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
  const std::string listen = absl::GetFlag(FLAGS_listen);
  auto credentials = server::MakeServerCredentials(tls, listen);
  if (!credentials.ok()) return credentials.status();
  const server::ServerLimits limits = LimitsFromCommandLine();
  if (absl::Status s = limits.Validate(); !s.ok()) return s;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!absl::GetFlag(FLAGS_reflection)) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  server::ApplyLimits(limits, &builder);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  SetHealth(server.get(), false);
  std::fprintf(stderr, "braidd: listening on port %d (%s); loading\n", port,
               tls.cert_file.empty() ? "plaintext" : "TLS");
  WritePortFile(absl::GetFlag(FLAGS_port_file), port);
  return server;
}

// SIGTERM: stop taking work, let open streams finish within the grace
// period, end the rest with a clear status, then stop the server.
void Drain(grpc::Server* server, server::BraidService& service,
           metrics::ServerMetrics& server_metrics) {
  const int grace_seconds = absl::GetFlag(FLAGS_drain_grace_seconds);
  service.StartDrain();
  SetHealth(server, false);
  server_metrics.SetState(metrics::ServerState::kDraining);
  std::fprintf(stderr, "braidd: draining: %d open streams, %d s grace period\n",
               service.open_streams(), grace_seconds);
  const absl::Time deadline = absl::Now() + absl::Seconds(grace_seconds);
  while (service.open_streams() > 0 && absl::Now() < deadline &&
         g_signals.load() < 2) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int aborted = service.AbortStreams(grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("braidd shut down before this request finished: the "
                   "drain grace period (--drain_grace_seconds=",
                   grace_seconds, ") ended; retry on another replica")));
  if (aborted > 0) {
    std::fprintf(stderr, "braidd: ended %d streams after the grace period\n",
                 aborted);
  }
  // Lets the final statuses out, then cancels whatever is left.
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
}

int Run() {
  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty() && std::getenv("BRAID_MODEL") != nullptr) {
    path = std::getenv("BRAID_MODEL");
  }
  if (path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "no model: pass --model=PATH.gguf or set BRAID_MODEL"));
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  // Metrics first: they report the loading state.
  std::unique_ptr<metrics::Exporter> exporter;
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
      !listen.empty()) {
    auto served = metrics::Exporter::Serve(listen);
    if (!served.ok()) return Fail(served.status());
    exporter = *std::move(served);
    WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), exporter->port());
  } else {
    exporter = std::make_unique<metrics::Exporter>();
  }
  metrics::ServerMetrics server_metrics(exporter->registry(), BRAID_VERSION);

  std::unique_ptr<server::TokenAuthenticator> auth;
  if (const std::string file = absl::GetFlag(FLAGS_auth_token_file);
      !file.empty()) {
    auto loaded = server::TokenAuthenticator::FromFile(file);
    if (!loaded.ok()) return Fail(loaded.status());
    auth = *std::move(loaded);
  }
  server::ServiceOptions service_options;
  service_options.auth = auth.get();
  service_options.metrics = &server_metrics;
  if (const int s = absl::GetFlag(FLAGS_max_request_seconds); s > 0) {
    service_options.max_request_duration = absl::Seconds(s);
  }
  server::BraidService service(service_options);
  auto server = StartServer(&service);
  if (!server.ok()) return Fail(server.status());

  const absl::Time load_start = absl::Now();
  absl::SleepFor(absl::Milliseconds(absl::GetFlag(FLAGS_debug_load_delay_ms)));
  auto loaded = LoadModel(path);
  if (!loaded.ok()) return Fail(loaded.status());
  const model::Model& model = *loaded->llama;
  const model::LlamaConfig& config = loaded->llama->config();
  auto engine_options = server::MakeEngineOptions(
      EngineFlagsFromCommandLine(loaded->info.context_length),
      [&](int block_size) { return model.KvBlockBytes(block_size); },
      loaded->tokenizer.get());
  if (!engine_options.ok()) return Fail(engine_options.status());
  auto policy = streams::ParseQueuePolicy(absl::GetFlag(FLAGS_queue_policy));
  if (!policy.ok()) return Fail(policy.status());
  const std::string& model_name = model.info().name;
  metrics::EngineMetrics engine_metrics(
      exporter->registry(),
      {.vllm_names = absl::GetFlag(FLAGS_metrics_vllm_names),
       .model_name = model_name});
  batching::ModelExecutor executor(loaded->llama.get(),
                                   engine_options->scheduler.block_size,
                                   engine_options->scheduler.num_blocks);
  batching::Engine engine(&executor, loaded->tokenizer.get(), *engine_options,
                          streams::MakeWorkQueues(*policy), &engine_metrics);
  std::fprintf(stderr, "braidd: KV cache: %d blocks of %d tokens (%.1f MiB)\n",
               engine_options->scheduler.num_blocks,
               engine_options->scheduler.block_size,
               executor.kv_cache().bytes() / (1024.0 * 1024.0));
  service.SetReady(model.info(), loaded->tokenizer.get(),
                   loaded->chat_template.get(), &engine, loaded->info);
  server_metrics.SetModelInfo({.name = model_name,
                               .architecture = model.info().architecture,
                               .backend = model.info().backend,
                               .context_length = loaded->info.context_length});
  SetHealth(server->get(), true);
  server_metrics.SetState(metrics::ServerState::kServing);
  std::fprintf(stderr,
               "braidd: loaded %s (%s, %d layers, vocab %d) in %.2f s; "
               "serving\n",
               path.c_str(), config.arch.c_str(), config.n_layer,
               loaded->tokenizer->vocab_size(),
               absl::ToDoubleSeconds(absl::Now() - load_start));
  // Weights stay in the file's types; only norms, biases and rope factors
  // are read as f32.
  std::fprintf(stderr,
               "braidd: tensors %s (matrices multiplied in their own types; "
               "norms, biases and rope factors read as F32)\n",
               loaded->llama->DescribeTensorTypes().c_str());
  if (config.sliding_window > 0) {
    int sliding = 0;
    for (int il = 0; il < config.n_layer; ++il) sliding += config.Slides(il);
    std::fprintf(stderr,
                 "braidd: sliding-window attention over %d positions on %d of "
                 "%d layers (their K/V kept whole)\n",
                 config.sliding_window, sliding, config.n_layer);
  }
  if (const std::vector<std::string> unused = loaded->llama->UnusedTensors();
      !unused.empty()) {
    std::fprintf(stderr, "braidd: %zu tensors not used: %s\n", unused.size(),
                 absl::StrJoin(unused, ", ").c_str());
  }

  const std::string stats_file = absl::GetFlag(FLAGS_stats_file);
  while (g_signals.load() == 0) {
    absl::SleepFor(absl::Milliseconds(100));
    const batching::EngineStats stats = engine.Stats();
    engine_metrics.SetGauges(server::ToGauges(stats));
    if (!stats_file.empty()) server::WriteStatsFile(stats_file, stats);
    if (auth != nullptr) {
      if (absl::Status s = auth->ReloadIfChanged(); !s.ok()) {
        std::fprintf(stderr, "braidd: token file not reloaded: %s\n",
                     std::string(s.message()).c_str());
      }
    }
  }
  Drain(server->get(), service, server_metrics);
  engine.Shutdown();
  std::fprintf(stderr, "braidd: engine: %s\n",
               server::StatsJson(engine.Stats()).c_str());
  if (!stats_file.empty()) server::WriteStatsFile(stats_file, engine.Stats());
  std::fprintf(stderr, "braidd: stopped\n");
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  // --help lists braidd's own flags (this file), not absl's.
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] {
    return std::string("braidd " BRAID_VERSION "\n");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "serves a GGUF model over gRPC (braid.v1.Braid, grpc.health.v1).\n\n"
      "  braidd --model=PATH.gguf [--listen=127.0.0.1:50051] [flags]\n"
      "  braidd --flagfile=/etc/braid/braidd.conf   (one --flag=value a line;\n"
      "                                             see docs/OPERATIONS.md)");
  absl::ParseCommandLine(argc, argv);
  return braid::Run();
}
