// The C++ worker SDK's TLS: option checks, unreadable files, TLS and mTLS
// against a real gRPC client.
#include "clients/cpp/worker.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "clients/cpp/worker_test_support.h"

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

// PEM files of a throwaway CA, a server certificate for 127.0.0.1 and a
// client certificate, made with the openssl CLI in TEST_TMPDIR.
struct TestPki {
  std::string ca_crt, server_crt, server_key, client_crt, client_key;
};

void WriteTextFile(const std::string& path, const std::string& contents) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(contents.data(), 1, contents.size(), f);
  std::fclose(f);
}

void MakeTestPki(TestPki* pki) {
  ASSERT_EQ(std::system("command -v openssl >/dev/null 2>&1"), 0)
      << "the openssl CLI is missing: install Debian's `openssl` package";
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/sdk-pki";
  ASSERT_TRUE(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) << dir;
  WriteTextFile(dir + "/ca.cnf",
                "[req]\nprompt = no\ndistinguished_name = dn\nx509_extensions = ext\n"
                "[dn]\nCN = sdk test CA\n"
                "[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign\n");
  WriteTextFile(dir + "/leaf.cnf", "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\nCN = leaf\n");
  WriteTextFile(dir + "/server.ext", "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1\n");
  WriteTextFile(dir + "/client.ext", "extendedKeyUsage = clientAuth\n");
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string& command : {
           "openssl req -x509 -days 2 -config ca.cnf -keyout ca.key -out ca.crt" + key,
           "openssl req -new -config leaf.cnf -keyout server.key -out server.csr" + key,
           std::string("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 2"
                       " -days 2 -extfile server.ext -out server.crt"),
           "openssl req -new -config leaf.cnf -keyout client.key -out client.csr" + key,
           std::string("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial 3"
                       " -days 2 -extfile client.ext -out client.crt"),
       }) {
    const std::string line = "cd '" + dir + "' && " + command + " >>openssl.log 2>&1";
    ASSERT_EQ(std::system(line.c_str()), 0) << line << " (see " << dir << "/openssl.log)";
  }
  *pki = TestPki{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key", dir + "/client.crt",
                 dir + "/client.key"};
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
  TestPki pki;
  ASSERT_NO_FATAL_FAILURE(MakeTestPki(&pki));
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
