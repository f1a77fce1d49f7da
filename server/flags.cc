#include "server/flags.h"

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

// -- model and engine --------------------------------------------------------
ABSL_FLAG(std::string, model, "",
          "Path of the GGUF model to serve (default: $BRAID_MODEL).");
ABSL_FLAG(std::string, chat_template, "",
          "The chat template instead of the file's: a family name (chatml, "
          "qwen2.5, llama3, ...) or the path of a Jinja file (default: the "
          "GGUF's tokenizer.chat_template).");
ABSL_FLAG(std::string, device, "auto",
          "Where the model runs: cpu, cuda[:N] (GPU N, default 0; needs a "
          "braidd built with --config=cuda), or auto (GPU 0 when braidd has "
          "the CUDA executor and the machine a GPU, else the CPU).");
ABSL_FLAG(bool, cuda_graphs, true,
          "On a GPU: decode steps replay a CUDA graph per batch-size "
          "bucket; false launches every kernel of every step.");
ABSL_FLAG(bool, cuda_pdl, false,
          "On a GPU of compute capability 9.0+ (H100, H200): programmatic "
          "dependent launch, each kernel of a step scheduled while the one "
          "before it finishes.");
ABSL_FLAG(double, gpu_memory_fraction, 0.9,
          "On a GPU: the share of the device memory free after loading the "
          "weights that the KV cache takes (unless --kv_budget_tokens is "
          "set; --kv_budget_mb is for the CPU).");
ABSL_FLAG(int, threads, 0,
          "CPU threads for the model (0 = one per hardware thread).");
ABSL_FLAG(
    bool, packed_matmul, false,
    "Matrix products on weights repacked at load (AVX-512 + VNNI CPUs): "
    "prompts ~1.6-1.8x and batched decoding ~1.3-1.7x faster, "
    "deterministic and batch-invariant, but "
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
ABSL_FLAG(int, tpot_objective_ms, 60,
          "Stream isolation: while requests decode, a step may also take up "
          "to this many milliseconds (a time-per-output-token objective) when "
          "that lets more prompt tokens in than --max_decode_slowdown does; "
          "trades decoding streams' ITL for time to first token under load "
          "(0 = none: --max_decode_slowdown alone).");
ABSL_FLAG(int, ttft_objective_ms, 1000,
          "Stream isolation: a prompt's first token is due this many "
          "milliseconds after it could be admitted plus --prompt_slowdown "
          "times what its prefill alone takes; while requests decode, steps "
          "take only as many prompt tokens as keep every waiting prompt on "
          "time (earliest due first), between what --max_decode_slowdown "
          "and --tpot_objective_ms allow (0 = off: prompts always take all "
          "--tpot_objective_ms allows).");
ABSL_FLAG(double, prompt_slowdown, 2.5, "See --ttft_objective_ms.");
ABSL_FLAG(int, max_num_seqs, 64,
          "Sequences per engine step, and requests holding KV blocks at once.");
ABSL_FLAG(int, max_running, 0, "Deprecated alias of --max_num_seqs.");
ABSL_FLAG(int, max_waiting_requests, 256,
          "Requests that may wait for a batch slot (requests that free "
          "slots start at the next step do not count); beyond it "
          "RESOURCE_EXHAUSTED.");
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
ABSL_FLAG(int, drain_notice_seconds, 0,
          "On SIGTERM, first report NOT_SERVING (gRPC health, /health, the "
          "agent check's drain) but keep serving new requests this long, so "
          "balancers that poll stop routing here before requests are "
          "refused (a preStop sleep inside braidd); then drain.");
ABSL_FLAG(int, step_watchdog_seconds, 60,
          "An engine step running longer than this is logged, counted "
          "(braid_engine_stalls_total) and reported as NOT_SERVING until "
          "steps flow again (0 = off).");
ABSL_FLAG(std::string, agent_check_listen, "",
          "Serve an HAProxy agent check at HOST:PORT (port 0 picks one): "
          "each connection reads `ready up N%`, `drain` or `down` "
          "(docs/OPERATIONS.md). Empty: off.");
ABSL_FLAG(std::string, agent_check_port_file, "",
          "If set, write the bound agent-check port here.");
ABSL_FLAG(double, agent_reference_capacity, 100,
          "The capacity the agent check reports as weight 100%: capacity is "
          "requests finished per second / utilisation, as Envoy weighs the "
          "ORCA report (max_num_seqs / mean request time); faster replicas "
          "report more (up to 256%), slower or queueing ones less.");
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

// -- the OpenAI-compatible HTTP API ------------------------------------------
ABSL_FLAG(std::string, http_listen, "",
          "Serve the OpenAI-compatible HTTP API (/v1/completions, "
          "/v1/chat/completions, /v1/models, /health) on this host:port "
          "(port 0 picks a free port; empty = off). Same tokens and limits "
          "as gRPC.");
ABSL_FLAG(std::string, http_port_file, "",
          "If set, write the bound HTTP port here once listening.");
ABSL_FLAG(int, http_threads, 64,
          "HTTP connections served at once (each open request holds one; "
          "more wait to be read).");
ABSL_FLAG(int64_t, http_max_body_bytes, 4 << 20,
          "Largest HTTP request body; larger ones get 413.");
ABSL_FLAG(int, http_header_timeout_seconds, 10,
          "An HTTP request whose headers and body have not arrived within "
          "this long gets 408 and its connection is closed.");
ABSL_FLAG(std::string, served_model_name, "",
          "The model's id in the HTTP API (GET /v1/models, the `model` "
          "field); default: the model file's name without .gguf. Requests "
          "may also name the file's general.name.");

// -- observability -----------------------------------------------------------
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Serve Prometheus metrics at http://ADDRESS/metrics (host:port; "
          "port 0 picks a free port; empty = off).");
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
ABSL_FLAG(int, debug_min_step_ms, 0,
          "For tests: every engine step takes at least this long (a slower "
          "machine whose step time does not depend on the batch, for "
          "routing tests).");
ABSL_FLAG(int64_t, debug_stall_step, 0,
          "For tests: engine step number N (from 1) takes --debug_stall_ms "
          "longer (a stuck step, for the watchdog; 0 = never).");
ABSL_FLAG(int, debug_stall_ms, 0, "See --debug_stall_step.");

namespace braid::server {

namespace {

EngineFlags ReadEngineFlags() {
  EngineFlags e;
  e.kv_budget_mb = absl::GetFlag(FLAGS_kv_budget_mb);
  e.kv_budget_tokens = absl::GetFlag(FLAGS_kv_budget_tokens);
  e.block_size = absl::GetFlag(FLAGS_block_size);
  e.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  e.max_prefill_tokens_while_decoding =
      absl::GetFlag(FLAGS_max_prefill_tokens_while_decoding);
  e.prefill_tokens_per_decode_token =
      absl::GetFlag(FLAGS_prefill_tokens_per_decode_token);
  e.max_decode_slowdown = absl::GetFlag(FLAGS_max_decode_slowdown);
  e.tpot_objective_ms = absl::GetFlag(FLAGS_tpot_objective_ms);
  e.ttft_objective_ms = absl::GetFlag(FLAGS_ttft_objective_ms);
  e.prompt_slowdown = absl::GetFlag(FLAGS_prompt_slowdown);
  e.max_num_seqs = absl::GetFlag(FLAGS_max_running) > 0
                       ? absl::GetFlag(FLAGS_max_running)
                       : absl::GetFlag(FLAGS_max_num_seqs);
  e.max_waiting_requests = absl::GetFlag(FLAGS_max_waiting_requests);
  e.max_waiting_tokens = absl::GetFlag(FLAGS_max_waiting_tokens);
  e.queue_shares = {absl::GetFlag(FLAGS_io_share),
                    absl::GetFlag(FLAGS_reasoning_share),
                    absl::GetFlag(FLAGS_prompt_share)};
  e.think_start = absl::GetFlag(FLAGS_think_start);
  e.think_end = absl::GetFlag(FLAGS_think_end);
  e.session_idle_timeout_s = absl::GetFlag(FLAGS_session_idle_timeout_s);
  e.max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client);
  e.max_kept_sessions = absl::GetFlag(FLAGS_max_kept_sessions);
  e.debug_min_step_ms = absl::GetFlag(FLAGS_debug_min_step_ms);
  e.debug_stall_step = absl::GetFlag(FLAGS_debug_stall_step);
  e.debug_stall_ms = absl::GetFlag(FLAGS_debug_stall_ms);
  return e;
}

ServerLimits ReadLimits() {
  ServerLimits l;
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

// Transport security, tokens, drain, the watchdog and the agent check.
void ReadServing(DaemonFlags& f) {
  f.listen = absl::GetFlag(FLAGS_listen);
  f.tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  f.tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  f.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  f.tls.reload_seconds = absl::GetFlag(FLAGS_tls_reload_seconds);
  f.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
  f.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  f.drain_grace_seconds = absl::GetFlag(FLAGS_drain_grace_seconds);
  f.drain_notice_seconds = absl::GetFlag(FLAGS_drain_notice_seconds);
  f.step_watchdog_seconds = absl::GetFlag(FLAGS_step_watchdog_seconds);
  f.agent_check.listen = absl::GetFlag(FLAGS_agent_check_listen);
  f.agent_check.port_file = absl::GetFlag(FLAGS_agent_check_port_file);
  f.agent_check.reference_capacity =
      absl::GetFlag(FLAGS_agent_reference_capacity);
  f.max_request_seconds = absl::GetFlag(FLAGS_max_request_seconds);
  f.reflection = absl::GetFlag(FLAGS_reflection);
}

}  // namespace

DaemonFlags ReadFlags() {
  DaemonFlags f;
  f.model_path = absl::GetFlag(FLAGS_model);
  f.chat_template = absl::GetFlag(FLAGS_chat_template);
  if (f.model_path.empty() && std::getenv("BRAID_MODEL") != nullptr) {
    f.model_path = std::getenv("BRAID_MODEL");
  }
  f.device = absl::GetFlag(FLAGS_device);
  f.gpu_memory_fraction = absl::GetFlag(FLAGS_gpu_memory_fraction);
  f.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  f.cuda_pdl = absl::GetFlag(FLAGS_cuda_pdl);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.packed_matmul = absl::GetFlag(FLAGS_packed_matmul);
  f.context_length = absl::GetFlag(FLAGS_context_length);
  f.engine = ReadEngineFlags();
  f.queue_policy = absl::GetFlag(FLAGS_queue_policy);
  ReadServing(f);
  f.limits = ReadLimits();
  f.http.listen = absl::GetFlag(FLAGS_http_listen);
  f.http.port_file = absl::GetFlag(FLAGS_http_port_file);
  f.http.threads = absl::GetFlag(FLAGS_http_threads);
  f.http.max_body_bytes = absl::GetFlag(FLAGS_http_max_body_bytes);
  f.http.header_timeout_seconds =
      absl::GetFlag(FLAGS_http_header_timeout_seconds);
  f.http.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  f.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  f.stats_file = absl::GetFlag(FLAGS_stats_file);
  f.port_file = absl::GetFlag(FLAGS_port_file);
  f.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  f.debug_load_delay_ms = absl::GetFlag(FLAGS_debug_load_delay_ms);
  return f;
}

void ConfigureUsage(const char* version) {
  static const std::string* const version_line =
      new std::string(std::string("braidd ") + version + "\n");
  absl::FlagsUsageConfig usage;
  // --help lists braidd's own flags (this file), not absl's.
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "server/flags.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return *version_line; };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "serves a GGUF model over gRPC (braid.v1.Braid, grpc.health.v1) and,\n"
      "with --http_listen, the OpenAI-compatible HTTP API.\n\n"
      "  braidd --model=PATH.gguf [--listen=127.0.0.1:50051] "
      "[--http_listen=127.0.0.1:8080] [flags]\n"
      "  braidd --flagfile=/etc/braid/braidd.conf   (one --flag=value a line;\n"
      "                                             see docs/OPERATIONS.md)");
}

}  // namespace braid::server
