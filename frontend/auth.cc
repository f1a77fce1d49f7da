#include "frontend/auth.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace braid::frontend {
namespace {

absl::StatusOr<uint32_t> ParseScopes(absl::string_view list, int line_no) {
  uint32_t bits = 0;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    name = absl::StripAsciiWhitespace(name);
    if (name == "*") {
      bits |= kAllScopes;
    } else if (name == "generate") {
      bits |= static_cast<uint32_t>(Scope::kGenerate);
    } else if (name == "tokenize") {
      bits |= static_cast<uint32_t>(Scope::kTokenize);
    } else if (name == "detokenize") {
      bits |= static_cast<uint32_t>(Scope::kDetokenize);
    } else if (name == "info") {
      bits |= static_cast<uint32_t>(Scope::kInfo);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": unknown scope \"", name,
                       "\" (generate, tokenize, detokenize, info or *)"));
    }
  }
  return bits;
}

// Size, modification time and inode: changes when the file is rewritten or
// replaced (a Kubernetes Secret update swaps a symlink).
std::string FileStamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, ":", st.st_ino);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr absl::string_view kBearer = "bearer ";

// The token of `Bearer TOKEN`, or empty when the value is not of that form.
absl::string_view BearerToken(absl::string_view authorization) {
  if (authorization.size() <= kBearer.size() ||
      !absl::StartsWithIgnoreCase(authorization, kBearer)) {
    return "";
  }
  return absl::StripAsciiWhitespace(authorization.substr(kBearer.size()));
}

}  // namespace

std::string ClientIdentity(bool auth_on, absl::string_view authorization,
                           absl::string_view peer) {
  if (auth_on) {
    const size_t h =
        absl::Hash<absl::string_view>{}(BearerToken(authorization));
    return absl::StrCat("token:", absl::Hex(h, absl::kZeroPad16));
  }
  if (absl::StartsWith(peer, "ipv4:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) return std::string(peer.substr(0, colon));
  } else if (absl::StartsWith(peer, "ipv6:")) {
    const size_t end = peer.rfind("]:");  // "ipv6:[::1]:5000"
    if (end != absl::string_view::npos) {
      return std::string(peer.substr(0, end + 1));
    }
  }
  return std::string(peer);
}

absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text) {
  TokenTable table;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no,
                       ": expected `TOKEN [scope,scope...]` (no spaces "
                       "inside the scope list)"));
    }
    uint32_t scopes = kAllScopes;
    if (fields.size() == 2) {
      absl::StatusOr<uint32_t> parsed = ParseScopes(fields[1], line_no);
      if (!parsed.ok()) return parsed.status();
      scopes = *parsed;
    }
    table[std::string(fields[0])] = scopes;
  }
  return table;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>>
TokenAuthenticator::FromFile(const std::string& path) {
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator(path));
  absl::Status status = auth->ReloadIfChanged();
  if (!status.ok()) return status;
  return auth;
}

absl::Status TokenAuthenticator::ReloadIfChanged() {
  const std::string stamp = FileStamp(path_);
  if (!stamp.empty() && stamp == file_stamp_) return absl::OkStatus();
  absl::StatusOr<std::string> text = ReadFile(path_);
  if (!text.ok()) return text.status();
  absl::StatusOr<TokenTable> table = ParseTokenFile(*text);
  if (!table.ok()) {
    file_stamp_ = stamp;  // report a broken file once, not every poll
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", table.status().message()));
  }
  file_stamp_ = stamp;
  absl::MutexLock lock(&mu_);
  tokens_ = *std::move(table);
  return absl::OkStatus();
}

absl::Status TokenAuthenticator::Check(absl::string_view authorization,
                                       Scope scope,
                                       absl::string_view rpc_name) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing credentials: send the metadata `authorization: Bearer "
        "<token>`");
  }
  const std::string token(BearerToken(authorization));
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "the authorization metadata must be `Bearer <token>`");
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = tokens_.find(token);
  if (it == tokens_.end()) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  if ((it->second & static_cast<uint32_t>(scope)) == 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("this token may not call ", rpc_name,
                     " (its scopes in the token file do not include it)"));
  }
  return absl::OkStatus();
}

}  // namespace braid::frontend
