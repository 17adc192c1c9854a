// ControlClient: calls ferry's Control service (proto/ferry/v1/control.proto)
// for ferryctl. Owns the channel, its credentials (plaintext, TLS, mTLS) and
// the bearer token, gives every call its deadline, and turns a failed call's
// grpc::Status into an absl::Status (same code, same message) in one place.
//
// Threading: the methods may be called from any thread (a grpc stub is).
#ifndef FERRY_CLIENTS_FERRYCTL_CONTROL_CLIENT_H_
#define FERRY_CLIENTS_FERRYCTL_CONTROL_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "grpcpp/support/status.h"

namespace ferry::ferryctl {

struct ControlClientOptions {
  // Any gRPC target: host:port, dns:///name:port, unix:/path.
  std::string server = "127.0.0.1:7070";
  // File holding the bearer token (surrounding whitespace ignored). Wins
  // over `token`.
  std::string token_file;
  // The token itself (ferryctl passes $FERRY_CONTROL_TOKEN). Empty and no
  // token_file: no authorization metadata.
  std::string token;
  // PEM CA bundle that verifies the server; non-empty turns TLS on.
  std::string tls_ca_file;
  // PEM client certificate chain and key, for servers that require mTLS.
  // Both or neither; TLS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // The name the server certificate must carry, when it is not the host in
  // `server` (e.g. dialing an IP). TLS only.
  std::string tls_server_name;
  // Deadline of each call. ResetOffsets and SkipOffset get at least their
  // wait (the request's wait_ms, or the server's default) plus 20s, so a long
  // --wait is not cut short by the deadline.
  absl::Duration timeout = absl::Seconds(30);
};

// The metadata key and value prefix the token is sent with. The server
// compares against the same (gRPC metadata keys are lower case).
inline constexpr absl::string_view kAuthorizationKey = "authorization";
inline constexpr absl::string_view kBearerPrefix = "Bearer ";

// The same code and message as an absl::Status.
absl::Status FromGrpcStatus(const grpc::Status& status);

class ControlClient {
 public:
  // Reads the files the options name; the channel connects on the first
  // call. InvalidArgument for inconsistent options or an empty token file,
  // NotFound for a file that cannot be read.
  static absl::StatusOr<std::unique_ptr<ControlClient>> Create(
      const ControlClientOptions& options);

  // For tests: calls go to `stub` with `token` (may be empty).
  ControlClient(std::unique_ptr<v1::Control::StubInterface> stub, std::string token,
                absl::Duration timeout);

  absl::StatusOr<v1::PauseResponse> Pause(const v1::PauseRequest& request) const;
  absl::StatusOr<v1::ResumeResponse> Resume(const v1::ResumeRequest& request) const;
  absl::StatusOr<v1::ResetOffsetsResponse> ResetOffsets(
      const v1::ResetOffsetsRequest& request) const;
  absl::StatusOr<v1::GetStatusResponse> GetStatus(const v1::GetStatusRequest& request) const;
  absl::StatusOr<v1::SkipOffsetResponse> SkipOffset(const v1::SkipOffsetRequest& request) const;
  absl::StatusOr<v1::SetRateLimitResponse> SetRateLimit(
      const v1::SetRateLimitRequest& request) const;

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (v1::Control::StubInterface::*method)(grpc::ClientContext*, const Request&,
                                                         Response*),
      const Request& request, absl::Duration timeout) const;

  std::unique_ptr<v1::Control::StubInterface> stub_;
  std::string token_;
  absl::Duration timeout_;
};

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_CONTROL_CLIENT_H_
