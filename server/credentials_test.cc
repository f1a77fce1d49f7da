#include "server/credentials.h"

#include "gtest/gtest.h"

namespace braid::server {
namespace {

TEST(CredentialsTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:50051"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:50051"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:50051"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/run/braid.sock"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:50051"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:50051"));
  EXPECT_FALSE(IsLoopbackAddress(":50051"));
}

TEST(CredentialsTest, PlaintextOnlyOnLoopbackUnlessAllowed) {
  EXPECT_TRUE(MakeServerCredentials({}, "127.0.0.1:0").ok());
  auto refused = MakeServerCredentials({}, "0.0.0.0:50051");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--allow_insecure"),
            std::string::npos);
  TlsFlags allowed;
  allowed.allow_insecure = true;
  EXPECT_TRUE(MakeServerCredentials(allowed, "0.0.0.0:50051").ok());
}

TEST(CredentialsTest, FlagErrorsNameTheFlag) {
  TlsFlags key_only;
  key_only.key_file = "/tmp/key.pem";
  auto s = MakeServerCredentials(key_only, "127.0.0.1:0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls_cert_file"), std::string::npos);

  TlsFlags ca_only;
  ca_only.client_ca_file = "/tmp/ca.pem";
  s = MakeServerCredentials(ca_only, "127.0.0.1:0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls_client_ca_file"),
            std::string::npos);

  TlsFlags missing;
  missing.cert_file = "/nonexistent/cert.pem";
  missing.key_file = "/nonexistent/key.pem";
  s = MakeServerCredentials(missing, "127.0.0.1:0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls_cert_file=/nonexistent"),
            std::string::npos);
}

}  // namespace
}  // namespace braid::server
