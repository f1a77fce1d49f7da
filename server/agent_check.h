// An HAProxy agent-check endpoint: a TCP port where each connection gets the
// replica's one-line reply (frontend::LoadTracker::AgentReply: "ready up
// N%", "drain" or "down") and is closed. HAProxy polls it (`agent-check
// agent-port P agent-inter 500ms` on a server line) and scales that
// server's configured weight by N%.
#ifndef BRAID_SERVER_AGENT_CHECK_H_
#define BRAID_SERVER_AGENT_CHECK_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "frontend/load_report.h"

namespace braid::server {

class AgentCheckServer {
 public:
  // Listens on `listen` (host:port; port 0 picks one) and answers from
  // `load`, which outlives the server.
  static absl::StatusOr<std::unique_ptr<AgentCheckServer>> Start(
      const std::string& listen, const frontend::LoadTracker* load);
  ~AgentCheckServer();  // stops

  int port() const { return port_; }

 private:
  AgentCheckServer(int fd, int port, const frontend::LoadTracker* load);
  void Loop();

  const int fd_;
  const int port_;
  const frontend::LoadTracker* const load_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace braid::server

#endif  // BRAID_SERVER_AGENT_CHECK_H_
