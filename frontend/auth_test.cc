#include "frontend/auth.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace braid::frontend {
namespace {

TEST(ParseTokenFileTest, TokensScopesAndComments) {
  auto table = ParseTokenFile(
      "# operators\n"
      "\n"
      "  all-access-token  \n"
      "gen-only\tgenerate\n"
      "tok-info tokenize,info\n"
      "star *\n");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 4u);
  EXPECT_EQ(table->at("all-access-token"), kAllScopes);
  EXPECT_EQ(table->at("gen-only"), static_cast<uint32_t>(Scope::kGenerate));
  EXPECT_EQ(table->at("tok-info"), static_cast<uint32_t>(Scope::kTokenize) |
                                       static_cast<uint32_t>(Scope::kInfo));
  EXPECT_EQ(table->at("star"), kAllScopes);
}

TEST(ParseTokenFileTest, ErrorsNameTheLine) {
  auto bad_scope = ParseTokenFile("ok\nt generate,fly\n");
  ASSERT_FALSE(bad_scope.ok());
  EXPECT_NE(bad_scope.status().message().find("line 2"), std::string::npos);
  EXPECT_NE(bad_scope.status().message().find("fly"), std::string::npos);
  auto spaces = ParseTokenFile("t generate, tokenize\n");
  ASSERT_FALSE(spaces.ok());
  EXPECT_NE(spaces.status().message().find("line 1"), std::string::npos);
}

class AuthenticatorTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    std::rename(tmp.c_str(), path_.c_str());  // a new inode: a change
  }
  std::string path_ = absl::StrCat(::testing::TempDir(), "/tokens");
};

TEST_F(AuthenticatorTest, CodesForMissingWrongAndUnscopedTokens) {
  Write("good\nlimited tokenize\n");
  auto auth = TokenAuthenticator::FromFile(path_);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const TokenAuthenticator& a = **auth;
  EXPECT_TRUE(a.Check("Bearer good", Scope::kGenerate, "Generate").ok());
  EXPECT_TRUE(a.Check("bearer good", Scope::kInfo, "GetModelInfo").ok());
  EXPECT_EQ(a.Check("", Scope::kGenerate, "Generate").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Check("Basic Z29vZA==", Scope::kGenerate, "Generate").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Check("Bearer wrong", Scope::kGenerate, "Generate").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.Check("Bearer ", Scope::kGenerate, "Generate").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(a.Check("Bearer limited", Scope::kTokenize, "Tokenize").ok());
  absl::Status denied = a.Check("Bearer limited", Scope::kGenerate, "Generate");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("Generate"), std::string::npos);
}

TEST(ClientIdentityTest, TokenPrincipalOrPeerAddressWithoutPort) {
  // Authentication on: the token decides, not the connection.
  const std::string a = ClientIdentity(true, "Bearer alpha", "ipv4:1.2.3.4:5");
  EXPECT_EQ(a, ClientIdentity(true, "bearer  alpha ", "ipv4:9.9.9.9:7"));
  EXPECT_NE(a, ClientIdentity(true, "Bearer beta", "ipv4:1.2.3.4:5"));
  EXPECT_EQ(a.rfind("token:", 0), 0u);
  EXPECT_EQ(a.find("alpha"), std::string::npos);  // the token is not shown
  // Off: the peer's address; every connection has its own port.
  EXPECT_EQ(ClientIdentity(false, "", "ipv4:127.0.0.1:50123"),
            "ipv4:127.0.0.1");
  EXPECT_EQ(ClientIdentity(false, "Bearer x", "ipv4:127.0.0.1:1"),
            "ipv4:127.0.0.1");
  EXPECT_EQ(ClientIdentity(false, "", "ipv6:[::1]:50123"), "ipv6:[::1]");
  EXPECT_EQ(ClientIdentity(false, "", "unix:/run/braid.sock"),
            "unix:/run/braid.sock");
}

TEST_F(AuthenticatorTest, ReloadsWhenTheFileChangesAndKeepsTokensOnError) {
  Write("first\n");
  auto auth = TokenAuthenticator::FromFile(path_);
  ASSERT_TRUE(auth.ok());
  TokenAuthenticator& a = **auth;
  EXPECT_TRUE(a.ReloadIfChanged().ok());  // unchanged
  Write("second\n");
  EXPECT_TRUE(a.ReloadIfChanged().ok());
  EXPECT_EQ(a.Check("Bearer first", Scope::kGenerate, "Generate").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(a.Check("Bearer second", Scope::kGenerate, "Generate").ok());
  Write("second bogus-scope\n");
  EXPECT_FALSE(a.ReloadIfChanged().ok());
  EXPECT_TRUE(a.ReloadIfChanged().ok());  // reported once
  EXPECT_TRUE(a.Check("Bearer second", Scope::kGenerate, "Generate").ok());
}

TEST_F(AuthenticatorTest, MissingFileIsAnError) {
  EXPECT_FALSE(TokenAuthenticator::FromFile("/nonexistent/tokens").ok());
}

}  // namespace
}  // namespace braid::frontend
