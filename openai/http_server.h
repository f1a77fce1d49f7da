// braidd's OpenAI-compatible HTTP/1.1 front end (docs/OPERATIONS.md, "HTTP
// API"): POST /v1/completions and /v1/chat/completions (streamed as
// server-sent events or whole), GET /v1/models and GET /health, on
// cpp-httplib, calling the engine directly.
//
// The same rules as the gRPC service: bearer tokens (frontend/auth.h;
// completions and chat need the generate scope, models the info scope,
// health none), validation through frontend::RequestBuilder, the engine's
// admission control, --max_request_seconds. Errors are OpenAI's error
// object with the matching HTTP status (render.h). A client that closes
// its connection while its request runs cancels it (the handler polls the
// client's socket beside the request's events).
// A request whose headers and body have not arrived within header_timeout
// gets 408 and its connection is closed, so slow clients cannot hold the
// server's threads for long.
//
// Lifecycle as the gRPC service's: it answers before the model is loaded
// (503, /health 503), serves after SetReady, and drains (StartDrain: new
// requests and /health 503 while open requests go on; AbortAll ends those
// left). Thread-safe.
#ifndef BRAID_OPENAI_HTTP_SERVER_H_
#define BRAID_OPENAI_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "batching/engine.h"
#include "frontend/auth.h"
#include "metrics/server_metrics.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::openai {

struct HttpOptions {
  std::string listen;  // host:port; port 0 picks a free one
  int threads = 64;    // connections served at once (the rest wait)
  int64_t max_body_bytes = 4 << 20;
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration keep_alive_timeout = absl::Seconds(5);
  const frontend::TokenAuthenticator* auth = nullptr;  // null: open
  metrics::ServerMetrics* metrics = nullptr;           // null: none
  absl::Duration max_request_duration = absl::InfiniteDuration();
};

// What serves requests once the model is loaded; outlives the server.
struct HttpBackend {
  // The model's id in /v1/models; requests may name it or any alias, or
  // leave `model` out.
  std::string model_id;
  std::vector<std::string> aliases;
  int64_t created = 0;  // unix seconds, for /v1/models
  const model::Tokenizer* tokenizer = nullptr;
  const model::ChatTemplate* chat_template = nullptr;  // null: no chat
  batching::Engine* engine = nullptr;
  int context_length = 0;
};

class HttpServer {
 public:
  // Listens on options.listen and serves (503 until SetReady).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpOptions options);
  ~HttpServer();  // Stop()

  int port() const;
  void SetReady(HttpBackend backend);
  // /health answers 503 with {"status": reason} while a reason is set (a
  // stalled engine; a drain's notice period) and requests are still
  // served; null clears it.
  void SetUnhealthy(const char* reason);
  void StartDrain();
  int open_requests() const;
  // Cancels every open request with `status` (a stream ends with an error
  // event); returns how many.
  int AbortAll(const absl::Status& status);
  // Stops listening and closes the connections.
  void Stop();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::openai

#endif  // BRAID_OPENAI_HTTP_SERVER_H_
