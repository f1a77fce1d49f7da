// braid: command-line client for braidd.
//
//   braid [global flags] generate [--max-tokens N] [--temperature T]
//         [--seed S] [--top-k K] [--top-p P] [--stop S]... [--ignore-eos]
//         [--chat] PROMPT
//   braid [global flags] chat [--system TEXT] [--max-tokens N] [...]
//         [--hide-reasoning] [--stream-input] [--no-color]
//   braid [global flags] tokenize TEXT
//   braid [global flags] info
//   braid [global flags] health
//
// Flags go before or after the command, as --flag=value or --flag value;
// `--` ends them. Global flags: --addr HOST:PORT ($BRAID_ADDR, default
// 127.0.0.1:50051), --token T ($BRAID_TOKEN; sent as `authorization:
// Bearer T`), --tls-ca FILE (TLS, checking the server against this CA),
// --tls-cert FILE / --tls-key FILE (a client certificate, for mutual TLS).
//
// `generate` prints text as it arrives; a summary (finish reason, token
// counts, timings) goes to stderr. `chat` is tools/cli/chat.h. Exit status:
// 0 on success, 1 on an RPC error (its code and message go to stderr), 2 on
// bad usage.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "tools/cli/args.h"
#include "tools/cli/chat.h"

namespace {

using braid::cli::FlagSpec;
using braid::cli::ParsedArgs;

constexpr char kUsage[] =
    "usage: braid [global flags] COMMAND ... (flags before or after it)\n"
    "  generate [--max-tokens N] [--temperature T] [--seed S] [--top-k K]\n"
    "           [--top-p P] [--stop TEXT]... [--ignore-eos] [--chat] PROMPT\n"
    "  chat [--system TEXT] [--max-tokens N] [--temperature T] [--seed S]\n"
    "       [--top-k K] [--top-p P] [--hide-reasoning] [--stream-input]\n"
    "       [--no-color]   (Ctrl-C interrupts a reply; Ctrl-D ends)\n"
    "  tokenize TEXT\n"
    "  info\n"
    "  health\n"
    "Global flags: --addr HOST:PORT ($BRAID_ADDR, default 127.0.0.1:50051),\n"
    "  --token T ($BRAID_TOKEN), --tls-ca FILE, --tls-cert FILE,\n"
    "  --tls-key FILE. --flag=value and --flag value both work; -- ends "
    "flags.\n";

constexpr FlagSpec kFlags[] = {
    {"addr", true, ""},
    {"token", true, ""},
    {"tls-ca", true, ""},
    {"tls-cert", true, ""},
    {"tls-key", true, ""},
    {"help", false, ""},
    {"max-tokens", true, "generate,chat"},
    {"temperature", true, "generate,chat"},
    {"seed", true, "generate,chat"},
    {"top-k", true, "generate,chat"},
    {"top-p", true, "generate,chat"},
    {"stop", true, "generate,chat"},
    {"ignore-eos", false, "generate,chat"},
    {"chat", false, "generate"},
    {"system", true, "chat"},
    {"hide-reasoning", false, "chat"},
    {"stream-input", false, "chat"},
    {"no-color", false, "chat"},
};

std::string g_token;  // --token / $BRAID_TOKEN

std::unique_ptr<grpc::ClientContext> NewContext() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!g_token.empty()) ctx->AddMetadata("authorization", "Bearer " + g_token);
  return ctx;
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "braid: %s\n%s", why.c_str(), kUsage);
  return 2;
}

int RpcError(const grpc::Status& status) {
  std::fprintf(stderr, "braid: error %d: %s\n",
               static_cast<int>(status.error_code()),
               status.error_message().c_str());
  return 1;
}

const char* FinishName(braid::v1::FinishReason r) {
  switch (r) {
    case braid::v1::FINISH_REASON_EOS:
      return "eos";
    case braid::v1::FINISH_REASON_LENGTH:
      return "length";
    case braid::v1::FINISH_REASON_STOP:
      return "stop";
    case braid::v1::FINISH_REASON_CONTEXT_FULL:
      return "context_full";
    case braid::v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

// --max-tokens .. --stop into `sampling`; false (and a usage message) on a
// bad value.
bool FillSampling(const ParsedArgs& args, braid::v1::SamplingParams* sampling,
                  std::string* error) {
  for (const auto& [name, values] : args.flags) {
    const std::string& v = values.back();
    bool ok = true;
    if (name == "max-tokens") {
      int64_t n;
      ok = absl::SimpleAtoi(v, &n);
      sampling->set_max_tokens(n);
    } else if (name == "temperature") {
      float t;
      ok = absl::SimpleAtof(v, &t);
      sampling->set_temperature(t);
    } else if (name == "seed") {
      uint64_t s;
      ok = absl::SimpleAtoi(v, &s);
      sampling->set_seed(s);
    } else if (name == "top-k") {
      int k;
      ok = absl::SimpleAtoi(v, &k);
      sampling->set_top_k(k);
    } else if (name == "top-p") {
      float p;
      ok = absl::SimpleAtof(v, &p);
      sampling->set_top_p(p);
    } else if (name == "stop") {
      for (const std::string& stop : values) sampling->add_stop(stop);
    } else if (name == "ignore-eos") {
      sampling->set_ignore_eos(v == "true");
    }
    if (!ok) {
      *error = "bad value for --" + name + ": " + v;
      return false;
    }
  }
  return true;
}

int Generate(braid::v1::Braid::Stub& stub, const ParsedArgs& args) {
  braid::v1::GenerateRequest request;
  braid::v1::SamplingParams* sampling = request.mutable_sampling();
  std::string error;
  if (!FillSampling(args, sampling, &error)) return Usage(error);
  const std::string prompt = absl::StrJoin(args.positional, " ");
  if (prompt.empty()) return Usage("generate needs a PROMPT");
  if (!sampling->has_max_tokens()) sampling->set_max_tokens(256);
  if (args.Switch("chat")) {
    braid::v1::ChatMessage* m =
        request.mutable_prompt()->mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(prompt);
  } else {
    request.mutable_prompt()->set_text(prompt);
  }

  std::unique_ptr<grpc::ClientContext> context = NewContext();
  auto reader = stub.Generate(context.get(), request);
  braid::v1::GenerateResponse response;
  braid::v1::FinalInfo final_info;
  while (reader->Read(&response)) {
    std::fwrite(response.text().data(), 1, response.text().size(), stdout);
    std::fflush(stdout);
    if (response.has_final()) final_info = response.final();
  }
  grpc::Status status = reader->Finish();
  std::printf("\n");
  if (!status.ok()) return RpcError(status);
  const auto& u = final_info.usage();
  const auto& t = final_info.timings();
  std::fprintf(stderr,
               "[finish=%s prompt_tokens=%d output_tokens=%d ttft=%.3fs "
               "total=%.3fs]\n",
               FinishName(final_info.finish_reason()), u.prompt_tokens(),
               u.output_tokens(), t.time_to_first_token_seconds(),
               t.total_seconds());
  return 0;
}

int Tokenize(braid::v1::Braid::Stub& stub, const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return Usage("tokenize needs exactly one TEXT");
  }
  braid::v1::TokenizeRequest request;
  request.mutable_prompt()->set_text(args.positional[0]);
  braid::v1::TokenizeResponse response;
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  grpc::Status status = stub.Tokenize(context.get(), request, &response);
  if (!status.ok()) return RpcError(status);
  for (int i = 0; i < response.token_ids_size(); ++i) {
    std::printf("%d\t%s\n", response.token_ids(i), response.pieces(i).c_str());
  }
  return 0;
}

int Info(braid::v1::Braid::Stub& stub) {
  braid::v1::ModelInfo info;
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  grpc::Status status =
      stub.GetModelInfo(context.get(), braid::v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return RpcError(status);
  std::cout << info.DebugString();
  return 0;
}

int Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  grpc::Status status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return RpcError(status);
  std::printf("%s\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                          response.status())
                          .c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING
             ? 0
             : 1;
}

int Chat(braid::v1::Braid::Stub& stub, const ParsedArgs& args) {
  if (!args.positional.empty()) return Usage("chat takes no arguments");
  braid::cli::ChatOptions options;
  std::string error;
  if (!FillSampling(args, &options.sampling, &error)) return Usage(error);
  if (!options.sampling.has_max_tokens()) options.sampling.set_max_tokens(512);
  options.system = args.Get("system");
  options.hide_reasoning = args.Switch("hide-reasoning");
  options.stream_input = args.Switch("stream-input");
  options.color = !args.Switch("no-color");
  return braid::cli::RunChat(stub, g_token, options);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<ParsedArgs> parsed =
      braid::cli::ParseArgs({argv + 1, argv + argc}, kFlags);
  if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
  const ParsedArgs& args = *parsed;
  if (args.Switch("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const char* env_addr = std::getenv("BRAID_ADDR");
  const std::string addr =
      args.Get("addr", env_addr != nullptr ? env_addr : "127.0.0.1:50051");
  const char* env_token = std::getenv("BRAID_TOKEN");
  g_token = args.Get("token", env_token != nullptr ? env_token : "");
  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::InsecureChannelCredentials();
  if (args.Has("tls-ca") || args.Has("tls-cert")) {
    grpc::SslCredentialsOptions tls;
    for (const auto& [flag, field] :
         {std::pair{"tls-ca", &tls.pem_root_certs},
          std::pair{"tls-cert", &tls.pem_cert_chain},
          std::pair{"tls-key", &tls.pem_private_key}}) {
      if (args.Has(flag) && !ReadFile(args.Get(flag), field)) {
        return Usage(std::string("cannot read --") + flag + " " +
                     args.Get(flag));
      }
    }
    creds = grpc::SslCredentials(tls);
  }
  if (args.command.empty()) return Usage("missing COMMAND");
  auto channel = grpc::CreateChannel(addr, creds);
  auto stub = braid::v1::Braid::NewStub(channel);
  const std::string& command = args.command;
  if (command == "generate") return Generate(*stub, args);
  if (command == "chat") return Chat(*stub, args);
  if (command == "tokenize") return Tokenize(*stub, args);
  if (command == "info" && args.positional.empty()) return Info(*stub);
  if (command == "health" && args.positional.empty()) return Health(channel);
  return Usage("unknown command " + command);
}
