// The C++ worker SDK's TLS: option checks, unreadable files, TLS and mTLS
// against a real gRPC client.
#include "clients/cpp/worker.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "clients/cpp/worker_test_support.h"
#include "tests/tools/test_pki.h"

namespace ferry::sdk {
namespace {

using ferry::v1::Event;
using ferry::v1::ProcessResponse;
using ::testing::UnorderedElementsAre;
using testing::Client;
using testing::Options;
using testing::StartWorker;

TEST(WorkerTest, CreateRejectsIncompleteTls) {
  Handler ok = [](const Event&) { return Outcome::Ok(); };
  WorkerOptions o = Options(4);
  o.tls.cert_file = "/x/tls.crt";
  EXPECT_EQ(Worker::Create(o, ok).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(4);
  o.tls.client_ca_file = "/x/ca.crt";
  EXPECT_EQ(Worker::Create(o, ok).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerTest, StartNamesAnUnreadableTlsFile) {
  WorkerOptions o = Options(4);
  o.tls.cert_file = "/nonexistent/tls.crt";
  o.tls.key_file = "/nonexistent/tls.key";
  auto worker = Worker::Create(o, [](const Event&) { return Outcome::Ok(); });
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::Status s = (*worker)->Start("127.0.0.1:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "tls.cert_file: cannot read /nonexistent/tls.crt: No such file or directory");
}

std::string ReadTextFile(const std::string& path) {
  std::string contents;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) contents.append(buffer, n);
  std::fclose(f);
  return contents;
}

TEST(WorkerTest, ServesTlsAndRequiresClientCertificatesWithClientCa) {
  // A CA, a server certificate for 127.0.0.1 and a client certificate.
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<::ferry::testing::TestPki> made =
      ::ferry::testing::MakeTestPki(std::string(tmp != nullptr ? tmp : "/tmp") + "/sdk-pki");
  ASSERT_TRUE(made.ok()) << made.status();
  const ::ferry::testing::TestPki& pki = *made;
  WorkerOptions o = Options(4, "tls-worker");
  o.tls.cert_file = pki.server_crt;
  o.tls.key_file = pki.server_key;
  auto tls_worker = StartWorker(o, [](const Event&) { return Outcome::Ok(); });
  o.tls.client_ca_file = pki.ca_crt;
  auto mtls_worker = StartWorker(o, [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(tls_worker, nullptr);
  ASSERT_NE(mtls_worker, nullptr);

  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = ReadTextFile(pki.ca_crt);
  grpc::SslCredentialsOptions with_client_cert = server_only;
  with_client_cert.pem_cert_chain = ReadTextFile(pki.client_crt);
  with_client_cert.pem_private_key = ReadTextFile(pki.client_key);

  // TLS: the CA is enough; events flow.
  {
    Client client(tls_worker->port(), grpc::SslCredentials(server_only));
    EXPECT_EQ(client.ReadReady().worker_name(), "tls-worker");
    ASSERT_TRUE(client.SendEvents({1}));
    ASSERT_TRUE(client.ReadCredit(1));
    EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u));
  }
  // Plaintext to a TLS port: no stream.
  {
    Client client(tls_worker->port());
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_EQ(client.stream().Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  // mTLS: a client certificate from the CA is required.
  {
    Client client(mtls_worker->port(), grpc::SslCredentials(with_client_cert));
    EXPECT_EQ(client.ReadReady().worker_name(), "tls-worker");
  }
  {
    Client client(mtls_worker->port(), grpc::SslCredentials(server_only));
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_EQ(client.stream().Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(mtls_worker->events_received(), 0);
  tls_worker->Shutdown(absl::Seconds(1));
  mtls_worker->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace ferry::sdk
