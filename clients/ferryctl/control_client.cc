#include "clients/ferryctl/control_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "core/common/pem_file.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ferry::ferryctl {
namespace {

// The server's waits when a request leaves wait_ms at 0 (control.proto).
constexpr absl::Duration kDefaultResetWait = absl::Seconds(15);
constexpr absl::Duration kDefaultSkipWait = absl::Seconds(10);
// Time past the server's wait for it to plan the command (offset lookups) and
// append it to the control topic before waiting, and for the answer.
constexpr absl::Duration kWaitMargin = absl::Seconds(20);

absl::Duration CallTimeout(absl::Duration timeout, int64_t wait_ms, absl::Duration default_wait) {
  const absl::Duration wait = wait_ms > 0 ? absl::Milliseconds(wait_ms) : default_wait;
  return std::max(timeout, wait + kWaitMargin);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  // grpc::StatusCode and absl::StatusCode share their numbering (both are
  // the canonical codes 0-16).
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::unique_ptr<ControlClient>> ControlClient::Create(
    const ControlClientOptions& options) {
  const bool tls = !options.tls_ca_file.empty();
  if (!tls && (!options.tls_cert_file.empty() || !options.tls_key_file.empty() ||
               !options.tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_server_name need TLS: add --tls_ca=CA.pem (the CA "
        "that signed ferry's server certificate)");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls_cert=CERT.pem and --tls_key=KEY.pem");
  }

  std::string token = options.token;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> contents =
        ReadFileUpTo(options.token_file, kMaxPemFileBytes,
                     absl::StrCat("cannot read --token_file=", options.token_file));
    if (!contents.ok()) return contents.status();
    if (contents->size() > kMaxPemFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat("--token_file=", options.token_file,
                                                     " is over ", kMaxPemFileBytes,
                                                     " bytes; not a token"));
    }
    token = *std::move(contents);
  }
  // Files and environment values usually end with a newline, which is not
  // part of the token (and is not allowed in metadata).
  token = std::string(absl::StripAsciiWhitespace(token));
  if (!options.token_file.empty() && token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file=", options.token_file, " is empty"));
  }

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments arguments;
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadPemFile("--tls_ca", options.tls_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPemFile("--tls_cert", options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPemFile("--tls_key", options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      arguments.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.server, credentials, arguments);
  return std::make_unique<ControlClient>(v1::Control::NewStub(channel), std::move(token),
                                         options.timeout);
}

ControlClient::ControlClient(std::unique_ptr<v1::Control::StubInterface> stub, std::string token,
                             absl::Duration timeout)
    : stub_(std::move(stub)), token_(std::move(token)), timeout_(timeout) {}

template <typename Request, typename Response>
absl::StatusOr<Response> ControlClient::Call(
    grpc::Status (v1::Control::StubInterface::*method)(grpc::ClientContext*, const Request&,
                                                       Response*),
    const Request& request, absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // Per-call metadata rather than grpc call credentials: gRPC drops call
  // credentials on plaintext channels, and ferry may serve a token without
  // TLS (e.g. behind a mesh that terminates it).
  if (!token_.empty()) {
    context.AddMetadata(std::string(kAuthorizationKey), absl::StrCat(kBearerPrefix, token_));
  }
  Response response;
  const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::PauseResponse> ControlClient::Pause(const v1::PauseRequest& request) const {
  return Call(&v1::Control::StubInterface::Pause, request, timeout_);
}

absl::StatusOr<v1::ResumeResponse> ControlClient::Resume(const v1::ResumeRequest& request) const {
  return Call(&v1::Control::StubInterface::Resume, request, timeout_);
}

absl::StatusOr<v1::ResetOffsetsResponse> ControlClient::ResetOffsets(
    const v1::ResetOffsetsRequest& request) const {
  return Call(&v1::Control::StubInterface::ResetOffsets, request,
              CallTimeout(timeout_, request.wait_ms(), kDefaultResetWait));
}

absl::StatusOr<v1::GetStatusResponse> ControlClient::GetStatus(
    const v1::GetStatusRequest& request) const {
  return Call(&v1::Control::StubInterface::GetStatus, request, timeout_);
}

absl::StatusOr<v1::SkipOffsetResponse> ControlClient::SkipOffset(
    const v1::SkipOffsetRequest& request) const {
  return Call(&v1::Control::StubInterface::SkipOffset, request,
              CallTimeout(timeout_, request.wait_ms(), kDefaultSkipWait));
}

absl::StatusOr<v1::SetRateLimitResponse> ControlClient::SetRateLimit(
    const v1::SetRateLimitRequest& request) const {
  return Call(&v1::Control::StubInterface::SetRateLimit, request, timeout_);
}

}  // namespace ferry::ferryctl
