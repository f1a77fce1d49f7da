#include "server/service.h"

#include <set>
#include <utility>

#include "server/generate_call.h"
#include "server/status.h"

namespace braid::server {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                               const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

const char* TypeName(model::GgmlType type) {
  switch (type) {
    case model::GgmlType::kF32:
      return "F32";
    case model::GgmlType::kF16:
      return "F16";
    case model::GgmlType::kBF16:
      return "BF16";
    case model::GgmlType::kQ4_0:
      return "Q4_0";
    case model::GgmlType::kQ4_1:
      return "Q4_1";
    case model::GgmlType::kQ8_0:
      return "Q8_0";
  }
  return "?";
}

}  // namespace

BraidService::BraidService(const model::LlamaModel* model,
                           const model::Tokenizer* tokenizer,
                           const model::ChatTemplate* chat_template,
                           batching::Engine* engine, ServiceInfo info)
    : model_(model),
      tokenizer_(tokenizer),
      engine_(engine),
      builder_(tokenizer, chat_template,
               RequestBuilder::Limits{.context_length = info.context_length}),
      info_(std::move(info)) {}

grpc::ServerWriteReactor<v1::GenerateResponse>* BraidService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  absl::StatusOr<batching::GenerationRequest> built =
      builder_.BuildGenerate(*request);
  if (!built.ok()) return new GenerateCall(ToGrpcStatus(built.status()));
  if (built->request_id.empty()) {
    built->request_id = std::string(context->peer()) + "#" +
                        std::to_string(reinterpret_cast<uintptr_t>(context));
  }
  return new GenerateCall(engine_, *std::move(built));
}

grpc::ServerUnaryReactor* BraidService::Tokenize(
    grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
    v1::TokenizeResponse* response) {
  absl::StatusOr<std::vector<int32_t>> ids =
      builder_.Tokenize(request->prompt());
  if (!ids.ok()) return Done(context, ids.status());
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    response->add_pieces(SanitizeUtf8(tokenizer_->TokenBytes(id)));
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BraidService::Detokenize(
    grpc::CallbackServerContext* context, const v1::DetokenizeRequest* request,
    v1::DetokenizeResponse* response) {
  absl::Status status =
      builder_.CheckTokenIds(request->token_ids(), "token_ids");
  if (!status.ok()) return Done(context, status);
  std::vector<int32_t> ids(request->token_ids().begin(),
                           request->token_ids().end());
  response->set_text(SanitizeUtf8(tokenizer_->Decode(ids)));
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BraidService::GetModelInfo(
    grpc::CallbackServerContext* context, const v1::GetModelInfoRequest*,
    v1::ModelInfo* response) {
  const model::LlamaConfig& config = model_->config();
  const model::GgufFile& file = model_->file();
  response->set_name(file.GetString("general.name").value_or(""));
  response->set_architecture(
      file.GetString("general.architecture").value_or(""));
  response->set_path(info_.model_path);
  response->set_file_size_bytes(info_.file_size_bytes);
  response->set_vocab_size(tokenizer_->vocab_size());
  response->set_context_length(info_.context_length);
  response->set_num_layers(config.n_layer);
  response->set_embedding_length(config.n_embd);
  response->set_num_heads(config.n_head);
  response->set_num_kv_heads(config.n_head_kv);
  std::set<std::string> types;
  for (const model::GgufTensor& t : file.tensors())
    types.insert(TypeName(t.type));
  for (const std::string& t : types) response->add_tensor_types(t);
  response->set_bos_token_id(tokenizer_->bos_id());
  response->set_eos_token_id(tokenizer_->eos_id());
  response->set_chat_template(info_.chat_template_name);
  response->set_backend("cpu");
  response->set_num_threads(info_.num_threads);
  response->set_num_streams(1);
  response->set_braid_version(BRAID_VERSION);
  return Done(context, absl::OkStatus());
}

}  // namespace braid::server
