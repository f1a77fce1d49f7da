// Bearer-token authentication and per-RPC authorization for braid.v1.Braid.
//
// Tokens come from a file, one per line:
//
//   # comment
//   TOKEN                      every RPC
//   TOKEN  generate,tokenize   only these (generate, tokenize, detokenize,
//                              info; "*" = all)
//
// A call carries `authorization: Bearer TOKEN`. No or an unknown token ->
// UNAUTHENTICATED; a known token whose scopes do not include the RPC ->
// PERMISSION_DENIED. The file is re-read when it changes (ReloadIfChanged,
// called periodically by main); a file that no longer parses keeps the old
// tokens and the error is reported. The health service and reflection are
// not covered (probes carry no token).
//
// Thread-safe: Check from gRPC threads, ReloadIfChanged from any one thread.
#ifndef BRAID_FRONTEND_AUTH_H_
#define BRAID_FRONTEND_AUTH_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace braid::frontend {

// The RPCs a token may be scoped to (bits).
enum class Scope : uint32_t {
  kGenerate = 1,
  kTokenize = 2,
  kDetokenize = 4,
  kInfo = 8,
};
inline constexpr uint32_t kAllScopes = 15;

// token -> scope bits.
using TokenTable = absl::flat_hash_map<std::string, uint32_t>;

// Parses the token file's text; INVALID_ARGUMENT names the line at fault.
absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text);

// Who a call comes from, for per-client session limits and for resuming
// one's own sessions: with authentication on, the bearer token's principal
// ("token:" and a hash of the token, so the token itself is not kept or
// shown); otherwise the peer's address without its port ("ipv4:10.0.0.7"),
// since every connection of a client has its own port. `peer` is gRPC's
// peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/path").
std::string ClientIdentity(bool auth_on, absl::string_view authorization,
                           absl::string_view peer);

class TokenAuthenticator {
 public:
  // Reads `path`; an unreadable or invalid file is an error.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromFile(
      const std::string& path);

  // Re-reads the file when its size, modification time or inode changed.
  // OK when unchanged or reloaded; otherwise the old tokens stay in force.
  absl::Status ReloadIfChanged();

  // `authorization` is the call's authorization metadata value (empty when
  // absent); `rpc_name` is used in the PERMISSION_DENIED message.
  absl::Status Check(absl::string_view authorization, Scope scope,
                     absl::string_view rpc_name) const;

 private:
  explicit TokenAuthenticator(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  std::string file_stamp_;  // size, mtime and inode of the loaded file
  mutable absl::Mutex mu_;
  TokenTable tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_AUTH_H_
