#include "server/credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "util/status_macros.h"

namespace braid::server {
namespace {

// The file must exist and hold PEM data; checked at start so that a typo
// fails the daemon instead of every handshake.
absl::Status CheckPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read the file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": not a PEM file"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackAddress(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:")) return true;  // a local socket
  absl::string_view host = listen;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(1, host.find(']') == absl::string_view::npos
                              ? absl::string_view::npos
                              : host.find(']') - 1);
    return host == "::1";
  }
  host = host.substr(0, host.rfind(':'));
  return host == "localhost" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFlags& flags, absl::string_view listen) {
  const bool tls = !flags.cert_file.empty() || !flags.key_file.empty();
  if (!tls) {
    if (!flags.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file needs --tls_cert_file and --tls_key_file");
    }
    if (!flags.allow_insecure && !IsLoopbackAddress(listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to serve plaintext on ", listen,
          ", which is not a loopback address: pass --tls_cert_file and "
          "--tls_key_file, or --allow_insecure (for example behind a mesh "
          "that terminates TLS)"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (flags.cert_file.empty() || flags.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together");
  }
  if (flags.reload_seconds < 1) {
    return absl::InvalidArgumentError("--tls_reload_seconds must be >= 1");
  }
  for (auto [flag, path] :
       {std::pair{"tls_cert_file", &flags.cert_file},
        std::pair{"tls_key_file", &flags.key_file},
        std::pair{"tls_client_ca_file", &flags.client_ca_file}}) {
    if (path->empty()) continue;
    BRAID_RETURN_IF_ERROR(CheckPemFile(flag, *path));
  }
  const bool mutual = !flags.client_ca_file.empty();
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          flags.key_file, flags.cert_file, flags.client_ca_file,
          static_cast<unsigned>(flags.reload_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace braid::server
