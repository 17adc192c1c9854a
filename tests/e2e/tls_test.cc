// TLS between ferry and its workers, end to end: the ferry binary, the example
// C++ worker serving TLS, librdkafka's mock cluster (kafka_tool mock).
//
//   * TLS: ferry verifies the worker's certificate against `processors[0].tls`
//     ca_file; every event is handled and committed.
//   * mTLS: the worker requires a client certificate (--tls_client_ca). ferry
//     without one is refused at the handshake: it delivers nothing, commits
//     nothing and says so in its log. Restarted with the client certificate,
//     it delivers and commits every event: nothing was lost.
//
//   * Control over mTLS: with server.tls (cert, key, client CA) and a Control
//     token, a client with the CA and a client certificate (the gRPC stub and
//     ferryctl) gets GetStatus; a client without a certificate, or in
//     plaintext, cannot connect; server.health_listen answers plaintext
//     health checks (probes).
//
// The CA and certificates are made at test time in TEST_TMPDIR
// (tests/tools/test_pki.h, with the openssl CLI), so nothing checked in can
// expire.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <grpcpp/grpcpp.h>

#include "ferry/v1/control.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"
#include "tests/tools/test_pki.h"

namespace ferry::testing {
namespace {

constexpr int kEvents = 2000;
constexpr int kKeys = 100;
constexpr int kPartitions = 4;

// FerryConfig's processor gets a `tls:` section with these fields.
std::string WithProcessorTls(std::string config,
                             const std::vector<std::pair<std::string, std::string>>& tls) {
  // FerryConfig's one processor entry ends with this line.
  const std::string last_line = "    timeout: 60s\n";
  const size_t at = config.find(last_line);
  if (at == std::string::npos) {
    ADD_FAILURE() << "FerryConfig changed: no `" << last_line << "` line in\n" << config;
    return config;
  }
  std::string section = "    tls:\n";
  for (const auto& [key, value] : tls) absl::StrAppend(&section, "      ", key, ": ", value, "\n");
  config.insert(at + last_line.size(), section);
  return config;
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Every (key, sequence) handled, and how many handler runs there were.
std::pair<std::set<std::pair<std::string, int64_t>>, size_t> Handled(const Worker& worker) {
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker.record_path);
  EXPECT_TRUE(handled.ok()) << handled.status();
  std::set<std::pair<std::string, int64_t>> distinct;
  if (!handled.ok()) return {distinct, 0};
  for (const HandledEvent& event : *handled) distinct.emplace(event.key, event.sequence);
  return {distinct, handled->size()};
}

// The tests share one PKI, `pki_`.
class TlsTest : public TestPkiSuite {};

TEST_F(TlsTest, TlsWorkerGetsEveryEvent) {
  constexpr char kTopic[] = "tls";
  constexpr char kGroup[] = "ferry-tls";
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, kKeys, kPartitions).ok());
  absl::StatusOr<Worker> worker =
      StartWorker("tls", /*max_in_flight=*/64, /*port=*/0,
                  {"--tls_cert=" + pki_->server_crt, "--tls_key=" + pki_->server_key});
  ASSERT_TRUE(worker.ok()) << worker.status();

  // The target's host, 127.0.0.1, is checked against the certificate's IP SAN.
  absl::StatusOr<Subprocess> ferry = StartFerry(
      WithProcessorTls(FerryConfig(cluster->bootstrap, kGroup, kTopic,
                                   absl::StrCat("127.0.0.1:", worker->port), /*streams=*/4),
                       {{"ca_file", pki_->ca_crt}}),
      "ferry-tls");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, kTopic, kGroup, kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry)
                             << LogTail(worker->process);
  EXPECT_TRUE(absl::StrContains(ferry->Log(), "streams (TLS, CA " + pki_->ca_crt + ")"))
      << LogTail(*ferry);

  absl::StatusOr<int> ferry_exit = Terminate(*ferry, absl::Seconds(60));
  ASSERT_TRUE(ferry_exit.ok()) << ferry_exit.status();
  EXPECT_EQ(*ferry_exit, 0) << LogTail(*ferry);
  absl::StatusOr<int> worker_exit = Terminate(worker->process, absl::Seconds(30));
  ASSERT_TRUE(worker_exit.ok()) << worker_exit.status();
  EXPECT_EQ(*worker_exit, 0);
  const auto [distinct, runs] = Handled(*worker);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(runs, static_cast<size_t>(kEvents)) << "each event once on the happy path";
}

TEST_F(TlsTest, MtlsWithoutClientCertificateDeliversNothingAndLosesNothing) {
  constexpr char kTopic[] = "mtls";
  constexpr char kGroup[] = "ferry-mtls";
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, kKeys, kPartitions).ok());
  // --record_flush: the record is current while the worker runs, so "handled
  // nothing" can be read before it stops.
  absl::StatusOr<Worker> worker = StartWorker(
      "mtls", /*max_in_flight=*/64, /*port=*/0,
      {"--tls_cert=" + pki_->server_crt, "--tls_key=" + pki_->server_key,
       "--tls_client_ca=" + pki_->ca_crt, "--record_flush"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string target = absl::StrCat("ipv4:127.0.0.1:", worker->port);
  // server_name: the name checked is `localhost` (a DNS SAN), not the IP.
  const std::vector<std::pair<std::string, std::string>> server_only = {
      {"ca_file", pki_->ca_crt}, {"server_name", "localhost"}};
  // No worker can answer, so the drain at SIGTERM would only wait out the
  // grace.
  const std::string extra = "shutdown:\n  grace: 1s\n";

  // 1. No client certificate: every handshake is refused by the worker.
  absl::StatusOr<Subprocess> refused = StartFerry(
      WithProcessorTls(FerryConfig(cluster->bootstrap, kGroup, kTopic, target, /*streams=*/4,
                                   extra, /*progress_interval=*/"200ms"),
                       server_only),
      "ferry-no-client-cert");
  ASSERT_TRUE(refused.ok()) << refused.status();
  // How long is long enough to be sure nothing gets through? Not a fixed
  // time: wait until ferry holds every event (consumed them all) and logged
  // the connection error, and then until the worker refused two more of
  // ferry's handshakes. Each attempt is a full chance to deliver; ferry's
  // reconnect backoff is at most 5 s (server/workers/worker_pool.cc), so the two come
  // within about 10 s. The refusals are counted from the worker's gRPC log.
  const std::string refusal = "peer did not return a certificate";
  const std::string connection_error = absl::StrCat("cannot connect to ", target);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int refusals_when_all_consumed = -1;
  while (absl::Now() < deadline && !refused->TryWait().has_value()) {
    const std::string log = refused->Log();
    const int refusals = Count(worker->process.Log(), refusal);
    if (refusals_when_all_consumed < 0 && LastProgressValue(log, "consumed") == kEvents &&
        absl::StrContains(log, connection_error)) {
      refusals_when_all_consumed = refusals;
    }
    if (refusals_when_all_consumed >= 0 && refusals >= refusals_when_all_consumed + 2) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling logs
  }
  ASSERT_FALSE(refused->TryWait().has_value()) << "ferry exited\n" << LogTail(*refused);
  ASSERT_GE(refusals_when_all_consumed, 0)
      << "ferry never held all events and logged `" << connection_error << "`\n"
      << LogTail(*refused) << LogTail(worker->process);
  ASSERT_GE(Count(worker->process.Log(), refusal), refusals_when_all_consumed + 2)
      << LogTail(worker->process);
  // ferry's own log says why it cannot deliver.
  EXPECT_TRUE(absl::StrContains(refused->Log(), "WARN workers: processor default: cannot connect"))
      << LogTail(*refused);
  // Nothing reached the worker, nothing was committed.
  EXPECT_EQ(Handled(*worker).second, 0u);
  EXPECT_EQ(LastProgressValue(refused->Log(), "acked"), 0) << LogTail(*refused);
  absl::StatusOr<int> refused_exit = Terminate(*refused, absl::Seconds(60));
  ASSERT_TRUE(refused_exit.ok()) << refused_exit.status();
  EXPECT_EQ(*refused_exit, 0) << LogTail(*refused);
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(cluster->bootstrap, kTopic, kGroup);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), static_cast<size_t>(kPartitions));
  for (const auto& [partition, offset] : *committed) {
    EXPECT_EQ(offset, test_tools::kNoCommittedOffset) << "partition " << partition;
  }
  EXPECT_EQ(Handled(*worker).second, 0u);

  // 2. The same group with the client certificate: everything is delivered
  //    and committed.
  std::vector<std::pair<std::string, std::string>> with_client_cert = server_only;
  with_client_cert.emplace_back("cert_file", pki_->client_crt);
  with_client_cert.emplace_back("key_file", pki_->client_key);
  absl::StatusOr<Subprocess> accepted = StartFerry(
      WithProcessorTls(FerryConfig(cluster->bootstrap, kGroup, kTopic, target, /*streams=*/4,
                                   extra),
                       with_client_cert),
      "ferry-client-cert");
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, kTopic, kGroup, kEvents, *accepted, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*accepted)
                             << LogTail(worker->process);
  EXPECT_TRUE(absl::StrContains(accepted->Log(), "(mTLS, CA " + pki_->ca_crt +
                                                     ", server name localhost)"))
      << LogTail(*accepted);
  absl::StatusOr<int> accepted_exit = Terminate(*accepted, absl::Seconds(60));
  ASSERT_TRUE(accepted_exit.ok()) << accepted_exit.status();
  EXPECT_EQ(*accepted_exit, 0) << LogTail(*accepted);
  absl::StatusOr<int> worker_exit = Terminate(worker->process, absl::Seconds(30));
  ASSERT_TRUE(worker_exit.ok()) << worker_exit.status();
  EXPECT_EQ(*worker_exit, 0);

  const auto [distinct, runs] = Handled(*worker);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kEvents)) << "every event delivered";
  EXPECT_EQ(runs, static_cast<size_t>(kEvents)) << "and only once: the first ferry sent none";
  EXPECT_EQ(ReadStats(worker->stats_path)["events_received"], kEvents);
}


// GetStatus over `credentials` with the bearer token; the gRPC status.
grpc::Status GetStatusOver(int port, std::shared_ptr<grpc::ChannelCredentials> credentials,
                           v1::GetStatusResponse* response) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), credentials);
  auto stub = v1::Control::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  context.AddMetadata("authorization", "Bearer control-token");
  return stub->GetStatus(&context, v1::GetStatusRequest(), response);
}

TEST_F(TlsTest, ControlPortServesMtlsOnly) {
  constexpr char kTopic[] = "control-tls";
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string token_file = TempPath("control-tls-token");
  WriteFile(token_file, "control-token\n");
  std::string config = FerryConfig(cluster->bootstrap, "ferry-control-tls", kTopic,
                                   "127.0.0.1:1", /*streams=*/1,
                                   absl::StrCat("control:\n  token_file: ", token_file, "\n"));
  const std::string listen = "  listen: 127.0.0.1:0\n";
  const size_t at = config.find(listen);
  ASSERT_NE(at, std::string::npos) << config;
  config.insert(at + listen.size(),
                absl::StrCat("  health_listen: 127.0.0.1:0\n  tls:\n    cert_file: ", pki_->server_crt, "\n    key_file: ",
                             pki_->server_key, "\n    client_ca_file: ", pki_->ca_crt, "\n"));
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-control-tls");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  int port = -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (port < 0 && absl::Now() < deadline) {
    port = FerryHealthPort(ferry->Log());
    if (port < 0) absl::SleepFor(absl::Milliseconds(50));  // polling ferry's log
  }
  ASSERT_GT(port, 0) << LogTail(*ferry);
  EXPECT_TRUE(absl::StrContains(ferry->Log(), "over mTLS")) << LogTail(*ferry);
  // server.health_listen: plaintext health for probes that cannot do TLS.
  // ferry starts the plaintext health port after the Control port, so its
  // line can follow the Control line by a moment: wait for it too.
  const std::string marker = "serving plaintext health on port ";
  std::string log;
  PollUntil([&] { return absl::StrContains(log = ferry->Log(), marker); }, absl::Seconds(30),
            absl::Milliseconds(20));
  const size_t health_at = log.find(marker);
  ASSERT_NE(health_at, std::string::npos) << LogTail(*ferry);
  const int health_port = std::atoi(log.c_str() + health_at + marker.size());
  absl::StatusOr<bool> serving = IsServing(health_port);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);

  grpc::SslCredentialsOptions with_certificate;
  with_certificate.pem_root_certs = ReadFile(pki_->ca_crt);
  with_certificate.pem_cert_chain = ReadFile(pki_->client_crt);
  with_certificate.pem_private_key = ReadFile(pki_->client_key);
  v1::GetStatusResponse status;
  grpc::Status ok = GetStatusOver(port, grpc::SslCredentials(with_certificate), &status);
  EXPECT_TRUE(ok.ok()) << ok.error_code() << " " << ok.error_message();
  EXPECT_EQ(status.group_id(), "ferry-control-tls");

  grpc::SslCredentialsOptions without_certificate;
  without_certificate.pem_root_certs = ReadFile(pki_->ca_crt);
  EXPECT_FALSE(GetStatusOver(port, grpc::SslCredentials(without_certificate), &status).ok());
  EXPECT_FALSE(GetStatusOver(port, grpc::InsecureChannelCredentials(), &status).ok());

  absl::StatusOr<Subprocess> ctl = Subprocess::Start(
      {"clients/ferryctl/ferryctl", "status", absl::StrCat("--server=127.0.0.1:", port),
       "--token_file=" + token_file, "--tls_ca=" + pki_->ca_crt, "--tls_cert=" + pki_->client_crt,
       "--tls_key=" + pki_->client_key},
      TempPath("ferryctl-tls.log"));
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  EXPECT_EQ(ctl->Wait(absl::Seconds(60)).value_or(-1), 0) << ctl->Log();

  absl::StatusOr<int> exit = Terminate(*ferry, absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(*exit, 0) << LogTail(*ferry);
}

}  // namespace
}  // namespace ferry::testing
