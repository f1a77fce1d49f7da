// braidd: loads a GGUF model and serves it over gRPC.
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "batching/engine.h"
#include "batching/model_executor.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "server/engine_config.h"
#include "server/service.h"
#include "streams/work_queues.h"

ABSL_FLAG(std::string, model, "",
          "Path of the GGUF model to serve (default: $BRAID_MODEL).");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve gRPC on (host:port; port 0 picks a free port).");
ABSL_FLAG(int, threads, 0,
          "CPU threads for the model (0 = one per hardware thread).");
ABSL_FLAG(int, context_length, 4096,
          "Tokens per sequence (prompt plus output); capped at the model's "
          "trained context length.");
ABSL_FLAG(int, kv_budget_mb, 512,
          "Memory for the paged KV cache, in MiB; sets the number of blocks.");
ABSL_FLAG(int, kv_budget_tokens, 0,
          "If > 0, size the KV cache for this many tokens instead of "
          "--kv_budget_mb.");
ABSL_FLAG(int, block_size, 16, "Tokens per KV cache block.");
ABSL_FLAG(int, max_batch_tokens, 512,
          "Tokens per engine step (decode tokens plus prefill chunks).");
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
ABSL_FLAG(std::string, stats_file, "",
          "If set, write the engine's counters here as JSON about every "
          "100 ms (for tests and operators).");
ABSL_FLAG(bool, reflection, false, "Enable gRPC server reflection.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound port to this file once serving (for tests "
          "that listen on port 0).");

namespace braid {
namespace {

constexpr char kServiceName[] = "braid.v1.Braid";

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "braidd: %s\n", std::string(status.message()).c_str());
  return 1;
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
  const absl::Time load_start = absl::Now();
  auto file = model::GgufFile::Open(path);
  if (!file.ok()) return Fail(file.status());
  auto tokenizer_data = model::TokenizerDataFromGguf(**file);
  if (!tokenizer_data.ok()) return Fail(tokenizer_data.status());
  auto tokenizer = model::Tokenizer::Create(*std::move(tokenizer_data));
  if (!tokenizer.ok()) return Fail(tokenizer.status());

  std::unique_ptr<model::ChatTemplate> chat_template;
  std::string template_name;
  if (auto source = (*file)->GetString("tokenizer.chat_template");
      source.ok()) {
    auto t = model::ChatTemplate::FromSource(
        *source, (*tokenizer)->TokenBytes((*tokenizer)->bos_id()),
        (*tokenizer)->TokenBytes((*tokenizer)->eos_id()));
    if (t.ok()) {
      chat_template = std::make_unique<model::ChatTemplate>(*std::move(t));
      template_name = std::string(chat_template->name());
    } else {
      std::fprintf(stderr, "braidd: chat prompts disabled: %s\n",
                   std::string(t.status().message()).c_str());
    }
  }

  model::LoadOptions load_options;
  load_options.num_threads = absl::GetFlag(FLAGS_threads);
  auto llama = model::LlamaModel::Load(*std::move(file), load_options);
  if (!llama.ok()) return Fail(llama.status());
  const model::LlamaConfig& config = (*llama)->config();

  server::ServiceInfo info;
  info.model_path = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) info.file_size_bytes = st.st_size;
  info.context_length =
      std::min<int>(absl::GetFlag(FLAGS_context_length), config.n_ctx_train);
  info.num_threads =
      load_options.num_threads > 0
          ? load_options.num_threads
          : static_cast<int>(std::thread::hardware_concurrency());
  info.chat_template_name = template_name;

  server::EngineFlags flags;
  flags.kv_budget_mb = absl::GetFlag(FLAGS_kv_budget_mb);
  flags.kv_budget_tokens = absl::GetFlag(FLAGS_kv_budget_tokens);
  flags.block_size = absl::GetFlag(FLAGS_block_size);
  flags.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
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
  flags.context_length = info.context_length;
  auto engine_options = server::MakeEngineOptions(
      flags, config.n_layer, config.kv_dim(), tokenizer->get());
  if (!engine_options.ok()) return Fail(engine_options.status());
  auto policy = streams::ParseQueuePolicy(absl::GetFlag(FLAGS_queue_policy));
  if (!policy.ok()) return Fail(policy.status());
  batching::ModelExecutor executor(llama->get(),
                                   engine_options->scheduler.block_size,
                                   engine_options->scheduler.num_blocks);
  batching::Engine engine(&executor, tokenizer->get(), *engine_options,
                          streams::MakeWorkQueues(*policy));
  std::fprintf(stderr, "braidd: KV cache: %d blocks of %d tokens (%.1f MiB)\n",
               engine_options->scheduler.num_blocks,
               engine_options->scheduler.block_size,
               executor.pool().bytes() / (1024.0 * 1024.0));
  server::BraidService service(llama->get(), tokenizer->get(),
                               chat_template.get(), &engine, info);
  std::fprintf(stderr, "braidd: loaded %s (%d layers, vocab %d) in %.2f s\n",
               path.c_str(), config.n_layer, (*tokenizer)->vocab_size(),
               absl::ToDoubleSeconds(absl::Now() - load_start));

  grpc::EnableDefaultHealthCheckService(true);
  if (absl::GetFlag(FLAGS_reflection)) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail(absl::UnavailableError(
        absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen))));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  std::fprintf(stderr, "braidd: serving on port %d\n", port);
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file);
      !port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", port);
      std::fclose(f);
      std::rename(tmp.c_str(), port_file.c_str());
    }
  }

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const std::string stats_file = absl::GetFlag(FLAGS_stats_file);
  while (!g_stop) {
    absl::SleepFor(absl::Milliseconds(100));
    if (!stats_file.empty()) server::WriteStatsFile(stats_file, engine.Stats());
  }
  std::fprintf(stderr, "braidd: shutting down\n");
  health->SetServingStatus(false);
  health->SetServingStatus(kServiceName, false);
  engine.Shutdown();
  std::fprintf(stderr, "braidd: engine: %s\n",
               server::StatsJson(engine.Stats()).c_str());
  if (!stats_file.empty()) server::WriteStatsFile(stats_file, engine.Stats());
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "braidd --model=PATH.gguf [--listen=127.0.0.1:50051] [flags]\n"
      "Serves a GGUF model over gRPC (braid.v1.Braid and grpc.health.v1).");
  absl::ParseCommandLine(argc, argv);
  return braid::Run();
}
