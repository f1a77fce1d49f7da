// braid: command-line client for braidd.
//
//   braid [--addr HOST:PORT] generate [--max-tokens N] [--temperature T]
//         [--seed S] [--top-k K] [--top-p P] [--stop S]... [--chat] PROMPT
//   braid [--addr HOST:PORT] tokenize TEXT
//   braid [--addr HOST:PORT] info
//   braid [--addr HOST:PORT] health
//
// `generate` prints text as it arrives; a summary (finish reason, token
// counts, timings) goes to stderr. Exit status: 0 on success, 1 on an RPC
// error (its code and message go to stderr), 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "grpcpp/grpcpp.h"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"

namespace {

constexpr char kUsage[] =
    "usage: braid [--addr HOST:PORT] COMMAND ...\n"
    "  generate [--max-tokens N] [--temperature T] [--seed S] [--top-k K]\n"
    "           [--top-p P] [--stop TEXT]... [--chat] PROMPT\n"
    "  tokenize TEXT\n"
    "  info\n"
    "  health\n"
    "The address defaults to $BRAID_ADDR or 127.0.0.1:50051.\n";

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

int Generate(braid::v1::Braid::Stub& stub, std::vector<std::string> args) {
  braid::v1::GenerateRequest request;
  braid::v1::SamplingParams* sampling = request.mutable_sampling();
  bool chat = false;
  std::string prompt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* {
      return i + 1 < args.size() ? &args[++i] : nullptr;
    };
    if (a == "--chat") {
      chat = true;
    } else if (a == "--max-tokens" || a == "--temperature" || a == "--seed" ||
               a == "--top-k" || a == "--top-p" || a == "--stop") {
      const std::string* v = value();
      if (v == nullptr) return Usage(a + " needs a value");
      bool ok = true;
      if (a == "--max-tokens") {
        int64_t n;
        ok = absl::SimpleAtoi(*v, &n);
        sampling->set_max_tokens(n);
      } else if (a == "--temperature") {
        float t;
        ok = absl::SimpleAtof(*v, &t);
        sampling->set_temperature(t);
      } else if (a == "--seed") {
        uint64_t s;
        ok = absl::SimpleAtoi(*v, &s);
        sampling->set_seed(s);
      } else if (a == "--top-k") {
        int k;
        ok = absl::SimpleAtoi(*v, &k);
        sampling->set_top_k(k);
      } else if (a == "--top-p") {
        float p;
        ok = absl::SimpleAtof(*v, &p);
        sampling->set_top_p(p);
      } else {
        sampling->add_stop(*v);
      }
      if (!ok) return Usage("bad value for " + a + ": " + *v);
    } else if (a.rfind("--", 0) == 0) {
      return Usage("unknown flag " + a);
    } else if (prompt.empty()) {
      prompt = a;
    } else {
      prompt += " " + a;
    }
  }
  if (prompt.empty()) return Usage("generate needs a PROMPT");
  if (!sampling->has_max_tokens()) sampling->set_max_tokens(256);
  if (chat) {
    braid::v1::ChatMessage* m =
        request.mutable_prompt()->mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(prompt);
  } else {
    request.mutable_prompt()->set_text(prompt);
  }

  grpc::ClientContext context;
  auto reader = stub.Generate(&context, request);
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

int Tokenize(braid::v1::Braid::Stub& stub,
             const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("tokenize needs exactly one TEXT");
  braid::v1::TokenizeRequest request;
  request.mutable_prompt()->set_text(args[0]);
  braid::v1::TokenizeResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub.Tokenize(&context, request, &response);
  if (!status.ok()) return RpcError(status);
  for (int i = 0; i < response.token_ids_size(); ++i) {
    std::printf("%d\t%s\n", response.token_ids(i), response.pieces(i).c_str());
  }
  return 0;
}

int Info(braid::v1::Braid::Stub& stub) {
  braid::v1::ModelInfo info;
  grpc::ClientContext context;
  grpc::Status status =
      stub.GetModelInfo(&context, braid::v1::GetModelInfoRequest(), &info);
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string addr =
      std::getenv("BRAID_ADDR") ? std::getenv("BRAID_ADDR") : "127.0.0.1:50051";
  while (!args.empty() && args[0].rfind("--", 0) == 0) {
    if (args[0] == "--addr" && args.size() >= 2) {
      addr = args[1];
      args.erase(args.begin(), args.begin() + 2);
    } else if (args[0].rfind("--addr=", 0) == 0) {
      addr = args[0].substr(7);
      args.erase(args.begin());
    } else if (args[0] == "--help" || args[0] == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      return Usage("unknown flag " + args[0]);
    }
  }
  if (args.empty()) return Usage("missing COMMAND");
  const std::string command = args[0];
  args.erase(args.begin());
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = braid::v1::Braid::NewStub(channel);
  if (command == "generate") return Generate(*stub, args);
  if (command == "tokenize") return Tokenize(*stub, args);
  if (command == "info" && args.empty()) return Info(*stub);
  if (command == "health" && args.empty()) return Health(channel);
  return Usage("unknown command " + command);
}
