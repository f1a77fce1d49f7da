#include "server/agent_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace braid::server {
namespace {

// What HAProxy reads: connect, read until the server closes.
std::string Ask(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

TEST(AgentCheckServerTest, AnswersEachConnectionWithTheCurrentReply) {
  frontend::LoadTracker load;
  auto server = AgentCheckServer::Start("127.0.0.1:0", &load);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  EXPECT_EQ(Ask((*server)->port()), "down\n");
  load.SetState(frontend::ReplicaState::kServing);
  EXPECT_EQ(Ask((*server)->port()), "ready up 100%\n");
  load.SetState(frontend::ReplicaState::kDraining);
  EXPECT_EQ(Ask((*server)->port()), "drain\n");
}

TEST(AgentCheckServerTest, BadAddressesAreRefusedByName) {
  frontend::LoadTracker load;
  for (const char* bad : {"nonsense", "127.0.0.1:99999", "127.0.0.1:x"}) {
    auto server = AgentCheckServer::Start(bad, &load);
    ASSERT_FALSE(server.ok()) << bad;
    EXPECT_NE(server.status().message().find("--agent_check_listen"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace braid::server
