// libFuzzer target: arbitrary bytes as serialized braid.v1 requests, through
// the validation a call runs before anything reaches the engine, on a real
// SentencePiece vocabulary and a ChatML template. The first byte picks the
// message: a GenerateRequest (RequestBuilder::BuildGenerate) or a
// SessionRequest whose open goes through BuildSession (or CheckResume) for
// a one-stream and a two-stream model. Every refusal must be
// INVALID_ARGUMENT, and what is accepted must fit the context.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "frontend/request_builder.h"
#include "frontend/session_open.h"
#include "google/protobuf/stubs/logging.h"
#include "model/gguf.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "proto/braid/v1/braid.pb.h"
#include "server/convert.h"
#include "tests/fuzz/vocab.h"

namespace {

constexpr int kContext = 256;
std::unique_ptr<braid::model::Tokenizer> g_tokenizer;
std::unique_ptr<braid::model::ChatTemplate> g_template;
std::unique_ptr<braid::frontend::RequestBuilder> g_builder;

void Check(const absl::Status& status) {
  if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
    std::abort();  // every refusal is INVALID_ARGUMENT
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Invalid UTF-8 in string fields is refused by the parser, with a log line
  // per input; the refusal is what matters.
  google::protobuf::SetLogHandler(nullptr);
  g_tokenizer = braid::fuzz::LoadTokenizer();
  auto chat = braid::model::ChatTemplate::FromSource(braid::fuzz::kChatMl,
                                                     "<s>", "</s>");
  if (!chat.ok()) std::abort();
  g_template = std::make_unique<braid::model::ChatTemplate>(*std::move(chat));
  g_builder = std::make_unique<braid::frontend::RequestBuilder>(
      g_tokenizer.get(), g_template.get(),
      braid::frontend::RequestBuilder::Limits{.context_length = kContext});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  const int length = static_cast<int>(size - 1);
  if (data[0] % 2 == 0) {
    braid::v1::GenerateRequest request;
    if (!request.ParseFromArray(bytes, length)) return 0;
    auto built = g_builder->BuildGenerate(braid::server::FromProto(request));
    Check(built.status());
    if (built.ok() &&
        (built->prompt.empty() ||
         static_cast<int>(built->prompt.size()) >= kContext ||
         built->max_tokens < 1 ||
         static_cast<int>(built->prompt.size()) + built->max_tokens >
             kContext)) {
      std::abort();
    }
    return 0;
  }
  braid::v1::SessionRequest request;
  if (!request.ParseFromArray(bytes, length) || !request.has_open()) return 0;
  const braid::frontend::SessionOpenSpec open =
      braid::server::FromProto(request.open());
  if (request.open().resume()) {
    Check(braid::frontend::CheckResume(open));
    return 0;
  }
  braid::frontend::ModelStreams one;
  braid::frontend::ModelStreams two{
      .count = 2, .roles = {"user", "model"}, .layout = "aligned"};
  for (const braid::frontend::ModelStreams* model : {&one, &two}) {
    auto built = braid::frontend::BuildSession(open, *g_builder, *model);
    Check(built.status());
    if (built.ok() && built->streams.empty()) std::abort();
  }
  return 0;
}
