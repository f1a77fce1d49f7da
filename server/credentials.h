// The listening port's credentials: plaintext, TLS, or mutual TLS, from PEM
// files that are watched and reloaded when they change (gRPC's
// FileWatcherCertificateProvider). Stateless functions.
#ifndef BRAID_SERVER_CREDENTIALS_H_
#define BRAID_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/server_credentials.h"

namespace braid::server {

struct TlsFlags {
  std::string cert_file;        // server certificate chain (PEM)
  std::string key_file;         // its private key (PEM)
  std::string client_ca_file;   // set: require client certificates (mTLS)
  int reload_seconds = 60;      // how often the files are checked
  bool allow_insecure = false;  // plaintext on a non-loopback address
};

// True for 127.0.0.0/8, [::1] and localhost listen addresses (host:port).
bool IsLoopbackAddress(absl::string_view listen);

// Credentials for `listen`. Plaintext needs no flags on loopback and
// --allow_insecure elsewhere; INVALID_ARGUMENT names the flag at fault
// (a key without a certificate, an unreadable file, ...).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFlags& flags, absl::string_view listen);

}  // namespace braid::server

#endif  // BRAID_SERVER_CREDENTIALS_H_
