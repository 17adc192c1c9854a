// Tests for tls_credentials: config mistakes are errors naming the key and
// the path; good files load; and the credentials really talk TLS to each
// other (a loopback handshake, with and without a client certificate).
//
// The certificates are made at test time (tests/tools/test_pki.h, with the
// openssl CLI), so nothing checked in can expire.
#include "server/workers/tls_credentials.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/test_pki.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::trunc) << contents;
}

// The tests share one PKI, `pki_`.
class TlsCredentialsTest : public testing::TestPkiSuite {
 protected:
  static TlsFiles Server(bool client_ca) {
    TlsFiles tls;
    tls.enabled = true;
    tls.cert_file = pki_->server_crt;
    tls.key_file = pki_->server_key;
    if (client_ca) tls.ca_file = pki_->ca_crt;
    return tls;
  }
  static TlsFiles Client(bool client_cert) {
    TlsFiles tls;
    tls.enabled = true;
    tls.ca_file = pki_->ca_crt;
    if (client_cert) {
      tls.cert_file = pki_->client_crt;
      tls.key_file = pki_->client_key;
    }
    return tls;
  }
};

TEST_F(TlsCredentialsTest, DisabledIsInsecure) {
  TlsFiles off;  // no `tls:` section; paths are ignored
  off.cert_file = "/nonexistent";
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server = ServerCredentialsFor(off);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE(*server, nullptr);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel =
      ChannelCredentialsFor(off, "processors[0].tls");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_NE(*channel, nullptr);
  EXPECT_EQ(DescribeChannelTls(off), "plaintext");
}

TEST_F(TlsCredentialsTest, MissingServerFilesNameTheKeyAndPath) {
  TlsFiles tls = Server(/*client_ca=*/true);
  tls.cert_file = "/nonexistent/tls.crt";
  absl::Status status = ServerCredentialsFor(tls).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "server.tls.cert_file: cannot read /nonexistent/tls.crt: No such file or directory");

  tls = Server(/*client_ca=*/true);
  tls.key_file = "/nonexistent/tls.key";
  EXPECT_EQ(ServerCredentialsFor(tls).status().message(),
            "server.tls.key_file: cannot read /nonexistent/tls.key: No such file or directory");

  tls = Server(/*client_ca=*/true);
  tls.ca_file = "/nonexistent/ca.crt";
  EXPECT_EQ(ServerCredentialsFor(tls).status().message(),
            "server.tls.client_ca_file: cannot read /nonexistent/ca.crt: No such file or directory");
}

TEST_F(TlsCredentialsTest, MissingChannelFilesNameTheKeyAndPath) {
  TlsFiles tls = Client(/*client_cert=*/true);
  tls.ca_file = "/nonexistent/ca.crt";
  absl::Status status = ChannelCredentialsFor(tls, "processors[1].tls").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "processors[1].tls.ca_file: cannot read /nonexistent/ca.crt: No such file or directory");

  tls = Client(/*client_cert=*/true);
  tls.cert_file = "/nonexistent/client.crt";
  EXPECT_THAT(ChannelCredentialsFor(tls, "processors[1].tls").status().message(),
              HasSubstr("processors[1].tls.cert_file: cannot read /nonexistent/client.crt"));

  tls = Client(/*client_cert=*/true);
  tls.key_file = "/nonexistent/client.key";
  EXPECT_THAT(ChannelCredentialsFor(tls, "processors[1].tls").status().message(),
              HasSubstr("processors[1].tls.key_file: cannot read /nonexistent/client.key"));
}

TEST_F(TlsCredentialsTest, UnreadableEmptyAndNonPemFilesAreErrors) {
  TlsFiles tls = Server(/*client_ca=*/false);
  tls.cert_file = TempPath("");  // a directory: fopen works, reading does not
  EXPECT_THAT(ServerCredentialsFor(tls).status().message(),
              HasSubstr("server.tls.cert_file: cannot read "));

  const std::string empty = TempPath("empty.pem");
  WriteFile(empty, "");
  tls = Server(/*client_ca=*/false);
  tls.key_file = empty;
  EXPECT_EQ(ServerCredentialsFor(tls).status().message(),
            absl::StrCat("server.tls.key_file: ", empty, " is empty"));

  const std::string garbage = TempPath("garbage.pem");
  WriteFile(garbage, "this is not a certificate\n");
  tls = Server(/*client_ca=*/false);
  tls.cert_file = garbage;
  EXPECT_THAT(ServerCredentialsFor(tls).status().message(),
              HasSubstr(absl::StrCat("server.tls.cert_file: ", garbage,
                                     " holds no PEM certificate")));

  TlsFiles client = Client(/*client_cert=*/false);
  client.ca_file = garbage;
  EXPECT_THAT(ChannelCredentialsFor(client, "processors[0].tls").status().message(),
              HasSubstr("processors[0].tls.ca_file: "));

  // A certificate where the key belongs.
  tls = Server(/*client_ca=*/false);
  tls.key_file = pki_->server_crt;
  EXPECT_THAT(ServerCredentialsFor(tls).status().message(),
              HasSubstr("server.tls.key_file: " + pki_->server_crt +
                        " holds no unencrypted PEM private key"));
}

TEST_F(TlsCredentialsTest, KeyMustBelongToTheCertificate) {
  TlsFiles tls = Server(/*client_ca=*/false);
  tls.key_file = pki_->stray_key;
  EXPECT_EQ(ServerCredentialsFor(tls).status().message(),
            absl::StrCat("server.tls.key_file: ", pki_->stray_key,
                         " is not the private key of the certificate in server.tls.cert_file ",
                         pki_->server_crt));

  TlsFiles client = Client(/*client_cert=*/true);
  client.key_file = pki_->server_key;
  EXPECT_THAT(ChannelCredentialsFor(client, "processors[0].tls").status().message(),
              HasSubstr("processors[0].tls.key_file: "));
}

TEST_F(TlsCredentialsTest, CertAndKeyGoTogether) {
  TlsFiles client = Client(/*client_cert=*/true);
  client.key_file.clear();
  EXPECT_EQ(ChannelCredentialsFor(client, "processors[0].tls").status().message(),
            "processors[0].tls: cert_file and key_file go together; set both (PEM files)");

  TlsFiles server = Server(/*client_ca=*/false);
  server.cert_file.clear();
  server.key_file.clear();
  EXPECT_THAT(ServerCredentialsFor(server).status().message(),
              HasSubstr("server.tls.cert_file: missing"));
}

TEST_F(TlsCredentialsTest, GoodFilesLoad) {
  for (bool client_ca : {false, true}) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server =
        ServerCredentialsFor(Server(client_ca));
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_NE(*server, nullptr);
  }
  for (bool client_cert : {false, true}) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel =
        ChannelCredentialsFor(Client(client_cert), "processors[0].tls");
    ASSERT_TRUE(channel.ok()) << channel.status();
    EXPECT_NE(*channel, nullptr);
  }
  // No ca_file: the system roots.
  TlsFiles system_roots;
  system_roots.enabled = true;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel =
      ChannelCredentialsFor(system_roots, "processors[0].tls");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_NE(*channel, nullptr);
  EXPECT_EQ(DescribeChannelTls(system_roots), "TLS, CA system roots");
  EXPECT_EQ(DescribeChannelTls(Client(/*client_cert=*/true)), "mTLS, CA " + pki_->ca_crt);
}

// A TLS server on 127.0.0.1:0 built from ServerCredentialsFor. It serves no
// method (a completed handshake is what makes the client channel READY); the
// generic service is there because gRPC refuses to start a server without one.
class TlsServer {
 public:
  explicit TlsServer(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterCallbackGenericService(&generic_);
    server_ = builder.BuildAndStart();
  }
  ~TlsServer() {
    if (server_ != nullptr) server_->Shutdown();
  }
  int port() const { return server_ != nullptr ? port_ : 0; }

 private:
  int port_ = 0;
  grpc::CallbackGenericService generic_;
  std::unique_ptr<grpc::Server> server_;
};

// Dials `target` and reports whether the channel became READY or gave up:
// waits for state changes until READY or TRANSIENT_FAILURE (a failed
// handshake), not for a fixed time. The deadline only bounds a hang.
grpc_connectivity_state Dial(const std::string& target, const TlsFiles& tls) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(tls, "processors[0].tls");
  EXPECT_TRUE(credentials.ok()) << credentials.status();
  if (!credentials.ok()) return GRPC_CHANNEL_SHUTDOWN;
  grpc::ChannelArguments arguments;
  AddTlsChannelArguments(tls, &arguments);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, *credentials, arguments);
  const auto deadline = absl::ToChronoTime(absl::Now() + absl::Seconds(30));
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE) {
    if (!channel->WaitForStateChange(state, deadline)) break;
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return state;
}

TEST_F(TlsCredentialsTest, TlsHandshakeWithTheCa) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFor(Server(/*client_ca=*/false));
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  TlsServer server(*credentials);
  ASSERT_GT(server.port(), 0);
  // The IP SAN matches the target's host.
  EXPECT_EQ(Dial(absl::StrCat("127.0.0.1:", server.port()), Client(false)), GRPC_CHANNEL_READY);
  // server_name overrides the name checked: the DNS SAN matches...
  TlsFiles by_name = Client(false);
  by_name.server_name = "localhost";
  EXPECT_EQ(Dial(absl::StrCat("ipv4:127.0.0.1:", server.port()), by_name), GRPC_CHANNEL_READY);
  // ...and a name the certificate does not carry fails the handshake.
  by_name.server_name = "not-the-server.example";
  EXPECT_EQ(Dial(absl::StrCat("127.0.0.1:", server.port()), by_name),
            GRPC_CHANNEL_TRANSIENT_FAILURE);
}

TEST_F(TlsCredentialsTest, ClientCaRequiresAClientCertificate) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFor(Server(/*client_ca=*/true));
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  TlsServer server(*credentials);
  ASSERT_GT(server.port(), 0);
  const std::string target = absl::StrCat("127.0.0.1:", server.port());
  EXPECT_EQ(Dial(target, Client(/*client_cert=*/true)), GRPC_CHANNEL_READY);
  EXPECT_EQ(Dial(target, Client(/*client_cert=*/false)), GRPC_CHANNEL_TRANSIENT_FAILURE);
}

}  // namespace
}  // namespace ferry
