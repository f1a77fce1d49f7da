#include "server/agent_check.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace braid::server {
namespace {

absl::Status ListenError(const std::string& listen, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--agent_check_listen=", listen, ": ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentCheckServer>> AgentCheckServer::Start(
    const std::string& listen, const frontend::LoadTracker* load) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return ListenError(listen, "expected HOST:PORT");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                           service.c_str(), &hints, &found);
      rc != 0) {
    return ListenError(listen, gai_strerror(rc));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return ListenError(listen, error);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<AgentCheckServer>(
      new AgentCheckServer(fd, bound_port, load));
}

AgentCheckServer::AgentCheckServer(int fd, int port,
                                   const frontend::LoadTracker* load)
    : fd_(fd), port_(port), load_(load), thread_([this] { Loop(); }) {}

AgentCheckServer::~AgentCheckServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void AgentCheckServer::Loop() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    const std::string reply = load_->AgentReply();
    // One short line into an empty socket buffer: a single send suffices.
    (void)send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
    shutdown(conn, SHUT_WR);
    close(conn);
  }
}

}  // namespace braid::server
