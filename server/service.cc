#include "server/service.h"

#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "server/convert.h"
#include "server/status.h"

namespace braid::server {
namespace {

absl::Time ClientDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

absl::string_view Authorization(const grpc::CallbackServerContext& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  return absl::string_view(it->second.data(), it->second.size());
}

}  // namespace

// What SetReady publishes: the loaded model and what serves it.
struct BraidService::Backend {
  Backend(const model::ModelInfo& model, const model::Tokenizer* tokenizer,
          const model::ChatTemplate* chat_template, batching::Engine* engine,
          ServiceInfo info)
      : model(model),
        tokenizer(tokenizer),
        engine(engine),
        builder(tokenizer, chat_template,
                frontend::RequestBuilder::Limits{.context_length =
                                                     info.context_length}),
        streams(frontend::ModelStreamsOf(model)),
        info(std::move(info)) {}

  const model::ModelInfo model;
  const model::Tokenizer* tokenizer;
  batching::Engine* engine;
  frontend::RequestBuilder builder;
  frontend::ModelStreams streams;
  ServiceInfo info;
};

BraidService::BraidService(ServiceOptions options) : options_(options) {}

BraidService::~BraidService() = default;

void BraidService::SetReady(const model::ModelInfo& model,
                            const model::Tokenizer* tokenizer,
                            const model::ChatTemplate* chat_template,
                            batching::Engine* engine, ServiceInfo info) {
  backend_owned_ = std::make_unique<Backend>(model, tokenizer, chat_template,
                                             engine, std::move(info));
  backend_.store(backend_owned_.get(), std::memory_order_release);
}

void BraidService::StartDrain() { draining_ = true; }

int BraidService::AbortStreams(const grpc::Status& status) {
  return streams_.AbortAll(status);
}

absl::StatusOr<const BraidService::Backend*> BraidService::Admit(
    grpc::CallbackServerContext* context, frontend::Scope scope,
    absl::string_view rpc_name) const {
  if (options_.auth != nullptr) {
    absl::Status status =
        options_.auth->Check(Authorization(*context), scope, rpc_name);
    if (!status.ok()) return status;
  }
  if (draining_) {
    return absl::UnavailableError(
        "braidd is draining (shutting down); send the request to another "
        "replica");
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) {
    return absl::UnavailableError(
        "braidd is still loading the model; retry when health reports "
        "SERVING");
  }
  return backend;
}

grpc::ServerUnaryReactor* BraidService::Done(
    grpc::CallbackServerContext* context, metrics::Rpc rpc,
    const absl::Status& status) {
  if (options_.metrics != nullptr) {
    options_.metrics->RecordRpc(rpc, static_cast<int>(status.code()));
  }
  AddLoadReport({.load = options_.load, .context = context});
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* BraidService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  const CallHooks hooks{&streams_, options_.metrics, options_.load, context};
  absl::StatusOr<const Backend*> backend =
      Admit(context, frontend::Scope::kGenerate, "Generate");
  if (!backend.ok()) {
    return new GenerateCall(ToGrpcStatus(backend.status()), hooks);
  }
  absl::StatusOr<batching::GenerationRequest> built =
      (*backend)->builder.BuildGenerate(FromProto(*request));
  if (!built.ok()) return new GenerateCall(ToGrpcStatus(built.status()), hooks);
  if (built->request_id.empty()) {
    built->request_id = std::string(context->peer()) + "#" +
                        std::to_string(reinterpret_cast<uintptr_t>(context));
  }
  // The engine enforces the earlier of the client's deadline and the
  // server's maximum duration.
  const absl::Time client_deadline = ClientDeadline(*context);
  built->deadline =
      std::min(client_deadline, built->arrival + options_.max_request_duration);
  return new GenerateCall((*backend)->engine, *std::move(built),
                          client_deadline, hooks);
}

grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionEvent>*
BraidService::Session(grpc::CallbackServerContext* context) {
  const CallHooks hooks{&streams_, options_.metrics, options_.load, context};
  absl::StatusOr<const Backend*> backend =
      Admit(context, frontend::Scope::kGenerate, "Session");
  if (!backend.ok()) {
    return new SessionCall(ToGrpcStatus(backend.status()), hooks);
  }
  SessionCall::Backend b;
  b.engine = (*backend)->engine;
  b.builder = &(*backend)->builder;
  b.context_length = (*backend)->info.context_length;
  b.model_streams = (*backend)->streams;
  b.owner = frontend::ClientIdentity(options_.auth != nullptr,
                                     Authorization(*context), context->peer());
  // Unique for the daemon's life: a session id must not repeat while an
  // earlier session of the client may still be open or kept.
  return new SessionCall(b,
                         std::string(context->peer()) + "#" +
                             std::to_string(session_number_.fetch_add(1) + 1),
                         hooks);
}

grpc::ServerUnaryReactor* BraidService::Tokenize(
    grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
    v1::TokenizeResponse* response) {
  constexpr metrics::Rpc kRpc = metrics::Rpc::kTokenize;
  absl::StatusOr<const Backend*> backend =
      Admit(context, frontend::Scope::kTokenize, "Tokenize");
  if (!backend.ok()) return Done(context, kRpc, backend.status());
  absl::StatusOr<std::vector<int32_t>> ids =
      (*backend)->builder.Tokenize(FromProto(request->prompt()));
  if (!ids.ok()) return Done(context, kRpc, ids.status());
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    response->add_pieces(
        frontend::SanitizeUtf8((*backend)->tokenizer->TokenBytes(id)));
  }
  return Done(context, kRpc, absl::OkStatus());
}

grpc::ServerUnaryReactor* BraidService::Detokenize(
    grpc::CallbackServerContext* context, const v1::DetokenizeRequest* request,
    v1::DetokenizeResponse* response) {
  constexpr metrics::Rpc kRpc = metrics::Rpc::kDetokenize;
  absl::StatusOr<const Backend*> backend =
      Admit(context, frontend::Scope::kDetokenize, "Detokenize");
  if (!backend.ok()) return Done(context, kRpc, backend.status());
  absl::Status status = (*backend)->builder.CheckTokenIds(
      absl::MakeConstSpan(request->token_ids().data(),
                          request->token_ids().size()),
      "token_ids");
  if (!status.ok()) return Done(context, kRpc, status);
  std::vector<int32_t> ids(request->token_ids().begin(),
                           request->token_ids().end());
  response->set_text(
      frontend::SanitizeUtf8((*backend)->tokenizer->Decode(ids)));
  return Done(context, kRpc, absl::OkStatus());
}

grpc::ServerUnaryReactor* BraidService::GetModelInfo(
    grpc::CallbackServerContext* context, const v1::GetModelInfoRequest*,
    v1::ModelInfo* response) {
  constexpr metrics::Rpc kRpc = metrics::Rpc::kGetModelInfo;
  absl::StatusOr<const Backend*> backend =
      Admit(context, frontend::Scope::kInfo, "GetModelInfo");
  if (!backend.ok()) return Done(context, kRpc, backend.status());
  const Backend& b = **backend;
  const model::ModelInfo& config = b.model;
  response->set_name(config.name);
  response->set_architecture(config.architecture);
  response->set_path(b.info.model_path);
  response->set_file_size_bytes(b.info.file_size_bytes);
  response->set_vocab_size(b.tokenizer->vocab_size());
  response->set_context_length(b.info.context_length);
  response->set_num_layers(config.n_layer);
  response->set_embedding_length(config.n_embd);
  response->set_num_heads(config.n_head);
  response->set_num_kv_heads(config.n_head_kv);
  for (const std::string& t : config.tensor_types) {
    response->add_tensor_types(t);
  }
  response->set_bos_token_id(b.tokenizer->bos_id());
  response->set_eos_token_id(b.tokenizer->eos_id());
  response->set_chat_template(b.info.chat_template_name);
  response->set_backend(config.backend);
  response->set_num_threads(b.info.num_threads);
  response->set_num_streams(b.streams.count);
  for (const std::string& role : b.streams.roles) {
    response->add_stream_roles(role);
  }
  response->set_stream_layout(b.streams.layout);
  response->set_silence_token_id(b.streams.silence_token_id);
  response->set_braid_version(BRAID_VERSION);
  return Done(context, kRpc, absl::OkStatus());
}

}  // namespace braid::server
