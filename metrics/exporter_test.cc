// The exposer binds a free loopback port and serves the registry over HTTP.
#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace braid::metrics {
namespace {

// GET /metrics over a plain socket; returns the whole response.
std::string HttpGet(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

TEST(ExporterTest, ServesTheRegistryOnAFreePort) {
  auto exporter = Exporter::Serve("127.0.0.1:0");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);
  prometheus::BuildCounter()
      .Name("braid_test_total")
      .Help("A test counter.")
      .Register((*exporter)->registry())
      .Add({})
      .Increment(3);
  const std::string body = HttpGet((*exporter)->port());
  EXPECT_NE(body.find("200 OK"), std::string::npos) << body;
  EXPECT_NE(body.find("braid_test_total 3"), std::string::npos) << body;
}

TEST(ExporterTest, BusyPortIsAnError) {
  auto first = Exporter::Serve("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  auto second =
      Exporter::Serve("127.0.0.1:" + std::to_string((*first)->port()));
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace braid::metrics
