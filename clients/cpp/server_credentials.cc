#include "clients/cpp/server_credentials.h"

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/common/pem_file.h"

namespace ferry::sdk::internal {
namespace {

// A PEM file's contents. Checked only for being readable and looking like
// PEM: gRPC parses it in BuildAndStart, and refuses a bad one with nothing
// but a log line, so the obvious mistakes get a clear error here.
absl::StatusOr<std::string> ReadPem(const std::string& option, const std::string& path) {
  absl::StatusOr<std::string> contents = ReadPemFile(option, path);
  if (contents.ok() && !HasPemBlock(*contents)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s is not PEM", option, path));
  }
  return contents;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const WorkerTls& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPem("tls.cert_file", tls.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls.key_file", tls.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("tls.client_ca_file", tls.client_ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace ferry::sdk::internal
