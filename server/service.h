#ifndef BRAID_SERVER_SERVICE_H_
#define BRAID_SERVER_SERVICE_H_

#include <string>

#include "batching/engine.h"
#include "model/llama.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "proto/braid/v1/braid.grpc.pb.h"
#include "server/request_builder.h"

namespace braid::server {

// Facts about the loaded model and daemon for GetModelInfo.
struct ServiceInfo {
  std::string model_path;
  int64_t file_size_bytes = 0;
  int context_length = 0;
  int num_threads = 0;
  std::string chat_template_name;
};

// The braid.v1.Braid service on gRPC's callback API. A thin layer: proto <->
// engine types, validation through RequestBuilder, errors through
// ToGrpcStatus. Reactions never block and never run model code.
// Thread-safe; the model, tokenizer, template and engine outlive it.
class BraidService final : public v1::Braid::CallbackService {
 public:
  BraidService(const model::LlamaModel* model,
               const model::Tokenizer* tokenizer,
               const model::ChatTemplate* chat_template,
               batching::Engine* engine, ServiceInfo info);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context,
      const v1::GenerateRequest* request) override;

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;

  grpc::ServerUnaryReactor* Detokenize(
      grpc::CallbackServerContext* context,
      const v1::DetokenizeRequest* request,
      v1::DetokenizeResponse* response) override;

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  const model::LlamaModel* model_;
  const model::Tokenizer* tokenizer_;
  batching::Engine* engine_;
  RequestBuilder builder_;
  ServiceInfo info_;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_SERVICE_H_
