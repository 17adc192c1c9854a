// The worker's gRPC server credentials from WorkerOptions::tls: plaintext,
// TLS, or mTLS (client_ca_file). The PEM files are read here, so a missing,
// empty, oversized or non-PEM file is a clear error from Worker::Start
// instead of only a gRPC log line.
//
// Threading: a pure function of the file system; any thread.
#ifndef FERRY_CLIENTS_CPP_SERVER_CREDENTIALS_H_
#define FERRY_CLIENTS_CPP_SERVER_CREDENTIALS_H_

#include <memory>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "clients/cpp/worker.h"

namespace ferry::sdk::internal {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const WorkerTls& tls);

}  // namespace ferry::sdk::internal

#endif  // FERRY_CLIENTS_CPP_SERVER_CREDENTIALS_H_
