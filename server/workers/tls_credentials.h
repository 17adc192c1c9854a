// gRPC credentials from ferry's `tls:` config sections (core/config/config.h TlsFiles).
//
// The PEM files are read and checked once, when the credentials are built at
// startup: a missing, unreadable, empty or unparsable file, or a key that does
// not belong to its certificate, is an error naming the config key and the
// path (`server.tls.cert_file: cannot read /x: No such file or directory`).
// Otherwise the mistake would only show up later as TLS handshakes failing on
// every connection, with nothing in the log pointing at the file.
//
// Files are not watched: rotating a certificate takes a restart.
//
// Threading: plain functions, no shared state.
#ifndef FERRY_SERVER_WORKERS_TLS_CREDENTIALS_H_
#define FERRY_SERVER_WORKERS_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/config.h"

namespace ferry {

// Credentials for a listening port. Insecure when `tls.enabled` is false.
// Otherwise TLS with cert_file/key_file; when ca_file (the config's
// `client_ca_file`) is set, every client must present a certificate that
// chains to it (mTLS). `key_path` prefixes errors.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TlsFiles& tls, const std::string& key_path = "server.tls");

// Credentials for a channel to a TLS server (e.g. `processors[0].tls`).
// Insecure when `tls.enabled` is false. The server certificate is verified
// against ca_file, or the system roots when ca_file is empty; cert_file and
// key_file, when set, are presented as the client certificate (mTLS).
// `key_path` prefixes errors.
//
// The name checked against the server certificate is the target's host
// (`dns:///workers:50051` → `workers`, `ipv4:127.0.0.1:1` → the IP, which
// must then be an IP SAN). Targets listing several addresses have no single
// host: set server_name and apply AddTlsChannelArguments.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TlsFiles& tls, const std::string& key_path);

// Adds what the channel needs beyond its credentials: with TLS enabled and
// server_name set, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, so the server
// certificate is checked for server_name instead of the target's host. No-op
// otherwise.
void AddTlsChannelArguments(const TlsFiles& tls, grpc::ChannelArguments* arguments);

// For logs: "plaintext", or "TLS"/"mTLS" (a client certificate is presented)
// with the CA and any server name, e.g. "mTLS, CA /etc/ferry/ca.crt".
std::string DescribeChannelTls(const TlsFiles& tls);

}  // namespace ferry

#endif  // FERRY_SERVER_WORKERS_TLS_CREDENTIALS_H_
