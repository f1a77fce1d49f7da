#include "openai/http_server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "frontend/request_builder.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "openai/api.h"
#include "openai/render.h"
#include "openai/run.h"

namespace braid::openai {
namespace {

using Json = nlohmann::json;

// The connection the current thread serves (httplib runs a connection's
// requests, handlers and content providers on one thread).
thread_local int t_socket = -1;
// Its inode: what identifies the connection, since socket numbers are
// reused as soon as they are closed.
thread_local uint64_t t_inode = 0;

// The inode of socket `fd` ("socket:[N]" in /proc/self/fd), or 0.
uint64_t SocketInode(int fd) {
  char link[64];
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return 0;
  absl::string_view target(link, static_cast<size_t>(n));
  uint64_t inode = 0;
  if (!absl::ConsumePrefix(&target, "socket:[") ||
      !absl::ConsumeSuffix(&target, "]") || !absl::SimpleAtoi(target, &inode)) {
    return 0;
  }
  return inode;
}

// Waits until `run` has news (events, its end, a failure), its deadline
// passes, or the client closes its connection (false). The request was
// read whole, so the client's socket reports only its end (POLLRDHUP) or
// a failure.
bool AwaitNews(const RequestRun& run) {
  pollfd fds[2] = {{run.wake_fd(), POLLIN, 0}, {t_socket, POLLRDHUP, 0}};
  const int n = t_socket >= 0 ? 2 : 1;
  const absl::Duration left = run.deadline() - absl::Now();
  const int timeout_ms =
      left == absl::InfiniteDuration()
          ? -1
          : static_cast<int>(std::clamp<int64_t>(
                absl::ToInt64Milliseconds(left) + 1, 0, 1 << 30));
  if (poll(fds, n, timeout_ms) <= 0) return true;
  return n < 2 || !(fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR));
}

std::string Peer(const httplib::Request& req) {
  const bool v6 = req.remote_addr.find(':') != std::string::npos;
  return v6 ? absl::StrCat("ipv6:[", req.remote_addr, "]:", req.remote_port)
            : absl::StrCat("ipv4:", req.remote_addr, ":", req.remote_port);
}

std::string RandomHex() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t v = absl::ToUnixNanos(absl::Now()) ^
                     (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  return absl::StrCat(absl::Hex(v, absl::kZeroPad16));
}

}  // namespace

// httplib's server with a deadline on reading each request: a connection
// whose request (headers and body) is not in within header_timeout gets
// 408 and is shut down by the watchdog thread. httplib hands each accepted
// connection to its task queue as a closure; ours (ConnectionPool) finds
// the connection's socket when it is queued, so the watchdog and the
// disconnect check know it.
class HttpServer::Impl : public httplib::Server {
 public:
  explicit Impl(HttpOptions options) : options_(std::move(options)) {}

  ~Impl() override { Stop(); }

  absl::Status Listen();
  // Stops listening, ends the connections and joins the threads.
  void Stop() {
    stop();
    {
      absl::MutexLock lock(&watch_mu_);
      watch_stop_ = true;
    }
    if (listener_.joinable()) listener_.join();
    if (watchdog_.joinable()) watchdog_.join();
  }
  int port_ = 0;

  void SetReady(HttpBackend backend) {
    backend_owned_ = std::make_unique<Backend>(std::move(backend));
    backend_.store(backend_owned_.get(), std::memory_order_release);
  }
  void StartDrain() { draining_ = true; }
  void SetUnhealthy(const char* reason) { unhealthy_ = reason; }
  int open_requests() const {
    absl::MutexLock lock(&runs_mu_);
    return static_cast<int>(runs_.size());
  }
  int AbortAll(const absl::Status& status) {
    std::vector<std::shared_ptr<RequestRun>> runs;
    {
      absl::MutexLock lock(&runs_mu_);
      for (auto& [id, weak] : runs_) {
        if (auto run = weak.lock()) runs.push_back(std::move(run));
      }
    }
    for (auto& run : runs) {
      if (options_.metrics != nullptr) {
        options_.metrics->RecordCancellation(metrics::CancelCause::kDrain);
      }
      run->Cancel(status);
    }
    return static_cast<int>(runs.size());
  }

  class ConnectionPool;
  // Listener thread, right after accept: the new connection's socket and
  // inode, the newest (largest inode) connection socket of our port not
  // yet being served; {-1, 0} when there is none.
  std::pair<int, uint64_t> FindNewConnection();
  // Pool thread: serves one connection (`serve`, httplib's task) with the
  // request deadline armed and t_socket set.
  void ServeConnection(int fd, uint64_t inode,
                       const std::function<void()>& serve);

 private:
  struct Backend {
    explicit Backend(HttpBackend b)
        : info(std::move(b)),
          builder(info.tokenizer, info.chat_template,
                  frontend::RequestBuilder::Limits{.context_length =
                                                       info.context_length}) {}
    bool Serves(const std::string& model) const {
      if (model == info.model_id) return true;
      for (const std::string& a : info.aliases) {
        if (model == a) return true;
      }
      return false;
    }
    HttpBackend info;
    frontend::RequestBuilder builder;
  };
  // One request's streamed response.
  struct StreamState {
    std::shared_ptr<RequestRun> run;
    StreamRenderer renderer;
    bool include_usage = false;
    metrics::Rpc rpc;
    uint64_t id = 0;
  };

  void Arm(absl::Time deadline) {
    if (t_inode == 0) return;
    absl::MutexLock lock(&watch_mu_);
    reading_[t_inode] = {t_socket, deadline};
    if (deadline < next_check_) rearmed_ = true;  // wake the watchdog
  }
  void Disarm() {
    if (t_inode == 0) return;
    absl::MutexLock lock(&watch_mu_);
    reading_.erase(t_inode);
  }
  void Watchdog();

  void Routes();
  absl::StatusOr<const Backend*> Admit(const httplib::Request& req,
                                       frontend::Scope scope,
                                       absl::string_view name) const;
  void Reply(httplib::Response& res, metrics::Rpc rpc,
             const absl::Status& status, std::string body = "");
  void Generate(Endpoint endpoint, const httplib::Request& req,
                httplib::Response& res);
  absl::StatusOr<std::shared_ptr<RequestRun>> StartRun(
      const Backend& b, const ApiRequest& api, const httplib::Request& req);
  // Waits for the whole response (stream: false).
  void Collect(std::shared_ptr<RequestRun> run, ResponseMeta meta,
               metrics::Rpc rpc, uint64_t id, httplib::Response& res);
  // One call of the content provider: streams until the run is over.
  bool Stream(StreamState& state, httplib::DataSink& sink);
  // Ends a run whose client closed its connection.
  void ClientLeft(RequestRun& run);
  uint64_t Track(const std::shared_ptr<RequestRun>& run);
  void Untrack(uint64_t id);
  void Record(metrics::Rpc rpc, const absl::Status& status) {
    if (options_.metrics != nullptr) {
      options_.metrics->RecordRpc(rpc, static_cast<int>(status.code()));
    }
  }

  const HttpOptions options_;
  std::unique_ptr<Backend> backend_owned_;
  std::atomic<const Backend*> backend_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<const char*> unhealthy_{nullptr};  // a string literal
  std::thread listener_, watchdog_;
  std::atomic<bool> listener_done_{false};

  absl::Mutex watch_mu_;
  bool watch_stop_ ABSL_GUARDED_BY(watch_mu_) = false;
  // The watchdog sleeps until next_check_ (the earliest deadline) unless an
  // earlier one is armed (rearmed_) or it is stopped.
  absl::Time next_check_ ABSL_GUARDED_BY(watch_mu_) = absl::InfiniteFuture();
  bool rearmed_ ABSL_GUARDED_BY(watch_mu_) = false;
  // Connections whose request is being read, by socket inode: the socket
  // and the deadline.
  absl::flat_hash_map<uint64_t, std::pair<int, absl::Time>> reading_
      ABSL_GUARDED_BY(watch_mu_);
  // The inodes of the connections being served.
  absl::flat_hash_set<uint64_t> connections_ ABSL_GUARDED_BY(watch_mu_);

  mutable absl::Mutex runs_mu_;
  uint64_t next_run_ ABSL_GUARDED_BY(runs_mu_) = 1;
  absl::flat_hash_map<uint64_t, std::weak_ptr<RequestRun>> runs_
      ABSL_GUARDED_BY(runs_mu_);
};

// httplib's thread pool, each connection's closure wrapped so that it runs
// with its socket known (Impl::ServeConnection).
class HttpServer::Impl::ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(HttpServer::Impl* server, int threads)
      : server_(server), pool_(threads) {}
  void enqueue(std::function<void()> fn) override;
  void shutdown() override { pool_.shutdown(); }

 private:
  HttpServer::Impl* const server_;
  httplib::ThreadPool pool_;
};

// Calls `f(fd, inode, listening)` for each TCP socket of this process bound
// to local port `port`.
template <typename F>
void ForEachSocketOnPort(int port, F f) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    int fd;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    const uint64_t inode = SocketInode(fd);
    if (inode == 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      continue;
    }
    int local_port = -1;
    if (local.ss_family == AF_INET) {
      local_port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    } else if (local.ss_family == AF_INET6) {
      local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
    }
    int listening = 0;
    socklen_t size = sizeof(listening);
    if (local_port != port ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0) {
      continue;
    }
    f(fd, inode, listening != 0);
  }
  closedir(dir);
}

std::pair<int, uint64_t> HttpServer::Impl::FindNewConnection() {
  std::pair<int, uint64_t> found = {-1, 0};
  absl::MutexLock lock(&watch_mu_);
  ForEachSocketOnPort(port_, [&](int fd, uint64_t inode, bool listening) {
    if (!listening && inode > found.second && !connections_.contains(inode)) {
      found = {fd, inode};
    }
  });
  if (found.second != 0) connections_.insert(found.second);
  return found;
}

void HttpServer::Impl::ServeConnection(int fd, uint64_t inode,
                                       const std::function<void()>& serve) {
  t_socket = fd;
  t_inode = inode;
  Arm(absl::Now() + options_.header_timeout);
  serve();  // closes the socket
  {
    absl::MutexLock lock(&watch_mu_);
    reading_.erase(inode);
    connections_.erase(inode);
  }
  t_socket = -1;
  t_inode = 0;
}

void HttpServer::Impl::ConnectionPool::enqueue(std::function<void()> fn) {
  const auto [fd, inode] = server_->FindNewConnection();
  pool_.enqueue([this, fd = fd, inode = inode, fn = std::move(fn)] {
    server_->ServeConnection(fd, inode, fn);
  });
}

absl::Status HttpServer::Impl::Listen() {
  const size_t colon = options_.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options_.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_listen: want HOST:PORT, got \"", options_.listen, "\""));
  }
  std::string host = options_.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  const int threads = options_.threads;
  new_task_queue = [this, threads] {
    return new ConnectionPool(this, threads);
  };
  set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  set_keep_alive_max_count(1 << 20);
  set_keep_alive_timeout(absl::ToInt64Seconds(options_.keep_alive_timeout));
  set_read_timeout(absl::ToInt64Seconds(options_.header_timeout) + 1);
  set_write_timeout(10);
  Routes();
  if (port == 0) {
    port_ = bind_to_any_port(host);
  } else if (bind_to_port(host, port)) {
    port_ = port;
  } else {
    port_ = -1;
  }
  if (port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http_listen: cannot listen on ", options_.listen));
  }
  // httplib listens with a backlog of 5: a burst of connections beyond it
  // (a load test's, a proxy's) would wait a second for SYN retries. Linux
  // takes a new backlog from a second listen().
  ForEachSocketOnPort(port_, [](int fd, uint64_t, bool listening) {
    if (listening) ::listen(fd, SOMAXCONN);
  });
  listener_ = std::thread([this] {
    listen_after_bind();
    listener_done_ = true;
  });
  watchdog_ = std::thread([this] { Watchdog(); });
  // httplib's stop() does nothing before its loop runs: wait for it, so that
  // a Stop() right after Start() (braidd failing to load the model) ends it.
  while (!is_running() && !listener_done_) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Watchdog() {
  static const std::string k408 = [] {
    const std::string body = ErrorBody(absl::DeadlineExceededError(
        "the request did not arrive in time (headers and body)"));
    return absl::StrCat(
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: ",
        body.size(), "\r\n\r\n", body);
  }();
  absl::MutexLock lock(&watch_mu_);
  auto wake = +[](Impl* impl) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return impl->watch_stop_ || impl->rearmed_;
  };
  while (!watch_stop_) {
    watch_mu_.AwaitWithTimeout(absl::Condition(wake, this),
                               next_check_ - absl::Now());
    rearmed_ = false;
    const absl::Time now = absl::Now();
    for (auto it = reading_.begin(); it != reading_.end();) {
      const auto [fd, deadline] = it->second;
      if (deadline > now) {
        ++it;
        continue;
      }
      // The reading thread only reads until Disarm, so this write does not
      // interleave with a response.
      (void)!send(fd, k408.data(), k408.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      shutdown(fd, SHUT_RDWR);
      reading_.erase(it++);
    }
    next_check_ = absl::InfiniteFuture();
    for (const auto& [inode, entry] : reading_) {
      next_check_ = std::min(next_check_, entry.second);
    }
  }
}

absl::StatusOr<const HttpServer::Impl::Backend*> HttpServer::Impl::Admit(
    const httplib::Request& req, frontend::Scope scope,
    absl::string_view name) const {
  if (options_.auth != nullptr) {
    absl::Status status = options_.auth->Check(
        req.get_header_value("Authorization"), scope, name);
    if (!status.ok()) return status;
  }
  if (draining_) {
    return absl::UnavailableError(
        "braidd is draining (shutting down); send the request to another "
        "replica");
  }
  const Backend* b = backend_.load(std::memory_order_acquire);
  if (b == nullptr) {
    return absl::UnavailableError(
        "braidd is still loading the model; retry when /health answers 200");
  }
  return b;
}

void HttpServer::Impl::Reply(httplib::Response& res, metrics::Rpc rpc,
                             const absl::Status& status, std::string body) {
  Record(rpc, status);
  res.status = HttpStatusOf(status);
  if (!status.ok()) body = ErrorBody(status);
  res.set_content(body, "application/json");
}

void HttpServer::Impl::Routes() {
  set_logger([this](const httplib::Request&, const httplib::Response&) {
    // The next request on this connection has the same time to arrive, on
    // top of the keep-alive wait.
    Arm(absl::Now() + options_.keep_alive_timeout + options_.header_timeout);
  });
  set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    absl::Status status =
        res.status == 413
            ? absl::InvalidArgumentError("body: larger than the server takes")
        : res.status == 404
            ? absl::NotFoundError("no such endpoint")
            : absl::InvalidArgumentError(absl::StrCat(
                  "the request was refused (HTTP ", res.status, ")"));
    res.set_content(ErrorBody(status), "application/json");
  });
  Post("/v1/completions",
       [this](const httplib::Request& req, httplib::Response& res) {
         Disarm();
         Generate(Endpoint::kCompletions, req, res);
       });
  Post("/v1/chat/completions",
       [this](const httplib::Request& req, httplib::Response& res) {
         Disarm();
         Generate(Endpoint::kChatCompletions, req, res);
       });
  Get("/v1/models",
      [this](const httplib::Request& req, httplib::Response& res) {
        Disarm();
        absl::StatusOr<const Backend*> b =
            Admit(req, frontend::Scope::kInfo, "/v1/models");
        if (!b.ok()) return Reply(res, metrics::Rpc::kModels, b.status());
        const HttpBackend& info = (*b)->info;
        Json model = {{"id", info.model_id},
                      {"object", "model"},
                      {"created", info.created},
                      {"owned_by", "braid"},
                      {"max_model_len", info.context_length}};
        Json body = {{"object", "list"}, {"data", Json::array({model})}};
        Reply(res, metrics::Rpc::kModels, absl::OkStatus(), body.dump());
      });
  Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    Disarm();
    const char* unhealthy = unhealthy_.load();
    const char* status = draining_                    ? "draining"
                         : backend_.load() == nullptr ? "loading"
                         : unhealthy != nullptr       ? unhealthy
                                                      : nullptr;
    res.status = status == nullptr ? 200 : 503;
    res.set_content(Json{{"status", status == nullptr ? "ok" : status}}.dump(),
                    "application/json");
  });
}

absl::StatusOr<std::shared_ptr<RequestRun>> HttpServer::Impl::StartRun(
    const Backend& b, const ApiRequest& api, const httplib::Request& req) {
  if (!api.model.empty() && !b.Serves(api.model)) {
    return absl::NotFoundError(
        absl::StrCat("model: \"", api.model, "\" is not served here (\"",
                     b.info.model_id, "\" is; GET /v1/models)"));
  }
  std::vector<batching::GenerationRequest> prompts;
  for (size_t p = 0; p < api.prompts.size(); ++p) {
    frontend::GenerateSpec spec;
    spec.tenant = api.user;
    spec.tpot_objective_ms = api.tpot_objective_ms;
    spec.ttft_objective_ms = api.ttft_objective_ms;
    spec.prompt = api.prompts[p];
    spec.sampling = api.sampling;
    absl::StatusOr<batching::GenerationRequest> built =
        b.builder.BuildGenerate(spec);
    if (!built.ok()) {
      absl::Status status = ToApiFields(built.status());
      if (api.prompts.size() > 1) {
        status = absl::Status(
            status.code(), absl::StrCat("prompt[", p, "]: ", status.message()));
      }
      return status;
    }
    built->request_id = absl::StrCat("http-", RandomHex(), "-", p);
    built->deadline = built->arrival + options_.max_request_duration;
    prompts.push_back(*std::move(built));
  }
  const std::string owner = frontend::ClientIdentity(
      options_.auth != nullptr, req.get_header_value("Authorization"),
      Peer(req));
  return RequestRun::Start(b.info.engine, std::move(prompts), api.n, owner,
                           absl::Now() + options_.max_request_duration);
}

void HttpServer::Impl::Generate(Endpoint endpoint, const httplib::Request& req,
                                httplib::Response& res) {
  const bool chat = endpoint == Endpoint::kChatCompletions;
  const metrics::Rpc rpc =
      chat ? metrics::Rpc::kChatCompletions : metrics::Rpc::kCompletions;
  absl::StatusOr<const Backend*> b =
      Admit(req, frontend::Scope::kGenerate,
            chat ? "/v1/chat/completions" : "/v1/completions");
  if (!b.ok()) return Reply(res, rpc, b.status());
  absl::StatusOr<ApiRequest> api = ParseRequest(endpoint, req.body);
  if (!api.ok()) return Reply(res, rpc, api.status());
  absl::StatusOr<std::shared_ptr<RequestRun>> run = StartRun(**b, *api, req);
  if (!run.ok()) return Reply(res, rpc, run.status());
  ResponseMeta meta;
  meta.endpoint = endpoint;
  meta.id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", RandomHex());
  meta.created = absl::ToUnixSeconds(absl::Now());
  meta.model = (*b)->info.model_id;
  meta.logprobs = api->sampling.logprobs;
  meta.tools = api->tools;
  meta.tokenizer = (*b)->info.tokenizer;
  const uint64_t id = Track(*run);
  if (!api->stream) {
    return Collect(*std::move(run), std::move(meta), rpc, id, res);
  }
  const int choices = (*run)->num_choices();
  auto state = std::make_shared<StreamState>(
      StreamState{*std::move(run), StreamRenderer(std::move(meta), choices),
                  api->include_usage, rpc, id});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, state](size_t, httplib::DataSink& sink) {
        return Stream(*state, sink);
      },
      [this, state](bool) { Untrack(state->id); });
}

void HttpServer::Impl::ClientLeft(RequestRun& run) {
  if (options_.metrics != nullptr) {
    options_.metrics->RecordCancellation(metrics::CancelCause::kClient);
  }
  run.Cancel(absl::CancelledError("the client closed the connection"));
}

void HttpServer::Impl::Collect(std::shared_ptr<RequestRun> run,
                               ResponseMeta meta, metrics::Rpc rpc, uint64_t id,
                               httplib::Response& res) {
  ResponseCollector collector(std::move(meta), run->num_choices());
  while (!run->over()) {
    if (!AwaitNews(*run)) {
      ClientLeft(*run);
    }
    for (const ChoiceEvent& e : run->Take()) collector.Add(e);
  }
  Untrack(id);
  const absl::Status status = run->status();
  if (!status.ok()) return Reply(res, rpc, status);
  Reply(res, rpc, status, collector.Body(run->prompt_tokens()));
}

bool HttpServer::Impl::Stream(StreamState& state, httplib::DataSink& sink) {
  RequestRun& run = *state.run;
  std::string out;
  while (!run.over()) {
    const bool client_there = AwaitNews(run);
    out.clear();
    for (const ChoiceEvent& e : run.Take()) state.renderer.Add(e, &out);
    if (!client_there ||
        (!out.empty() && !sink.write(out.data(), out.size()))) {
      ClientLeft(run);
      Record(state.rpc, run.status());
      return false;
    }
  }
  const absl::Status status = run.status();
  out.clear();
  if (!status.ok()) {
    out = StreamRenderer::ErrorEvent(status);
  } else if (state.include_usage) {
    out = state.renderer.UsageEvent(run.prompt_tokens());
  }
  out += StreamRenderer::kDone;
  Record(state.rpc, status);
  if (!sink.write(out.data(), out.size())) return false;
  sink.done();
  return true;
}

uint64_t HttpServer::Impl::Track(const std::shared_ptr<RequestRun>& run) {
  if (options_.metrics != nullptr) options_.metrics->SessionOpened();
  absl::MutexLock lock(&runs_mu_);
  const uint64_t id = next_run_++;
  runs_[id] = run;
  return id;
}

void HttpServer::Impl::Untrack(uint64_t id) {
  bool erased;
  {
    absl::MutexLock lock(&runs_mu_);
    erased = runs_.erase(id) > 0;
  }
  if (erased && options_.metrics != nullptr) {
    options_.metrics->SessionClosed();
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port_; }

void HttpServer::SetReady(HttpBackend backend) {
  impl_->SetReady(std::move(backend));
}

void HttpServer::StartDrain() { impl_->StartDrain(); }

void HttpServer::SetUnhealthy(const char* reason) {
  impl_->SetUnhealthy(reason);
}

int HttpServer::open_requests() const { return impl_->open_requests(); }

int HttpServer::AbortAll(const absl::Status& status) {
  return impl_->AbortAll(status);
}

void HttpServer::Stop() {
  if (impl_ != nullptr) impl_->Stop();
}

}  // namespace braid::openai
