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
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "server/service.h"

ABSL_FLAG(std::string, model, "",
          "Path of the GGUF model to serve (default: $BRAID_MODEL).");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve gRPC on (host:port; port 0 picks a free port).");
ABSL_FLAG(int, threads, 0,
          "CPU threads for the model (0 = one per hardware thread).");
ABSL_FLAG(int, context_length, 4096,
          "Tokens per sequence (prompt plus output); capped at the model's "
          "trained context length.");
ABSL_FLAG(int, max_running, 8, "Requests that hold a KV cache at once.");
ABSL_FLAG(int, max_waiting, 256,
          "Requests that may wait for a slot; beyond it RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, prefill_chunk, 512, "Prompt tokens per forward call.");
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

  batching::EngineOptions engine_options;
  engine_options.max_running = absl::GetFlag(FLAGS_max_running);
  engine_options.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  engine_options.prefill_chunk = absl::GetFlag(FLAGS_prefill_chunk);
  batching::Engine engine(llama->get(), tokenizer->get(), engine_options);
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
  while (!g_stop) absl::SleepFor(absl::Milliseconds(100));
  std::fprintf(stderr, "braidd: shutting down\n");
  health->SetServingStatus(false);
  health->SetServingStatus(kServiceName, false);
  engine.Shutdown();
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
