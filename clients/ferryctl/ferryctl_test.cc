// The real ferryctl binary against an in-process fake Control server on
// 127.0.0.1 (port 0): which request each command sends, what it prints, its
// exit codes (0 ok, 1 call failed, 2 usage, 3 reset not applied), the bearer
// token in the metadata, and TLS/mTLS. ferryctl runs as a subprocess and the
// test waits for it to exit; the fake answers synchronously, so there is
// nothing to poll.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "tests/mocks/fake_control.h"
#include "tests/tools/ferryctl_runner.h"

namespace ferry::ferryctl {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

template <typename T>
T Parse(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

using Outcome = testing::FerryctlOutcome;
using testing::FakeControl;

// Serves a FakeControl; each test runs ferryctl with Server() itself.
class FerryctlTest : public testing::FakeControlTest {};

TEST_F(FerryctlTest, StatusPrintsTables) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.status_response = Parse<v1::GetStatusResponse>(R"pb(
      replica: "ferry-a" group_id: "orders-ferry"
      partitions { topic: "orders" partition: 2 committed_offset: 10 end_offset: 15 lag: 5
                   lowest_unfinished_offset: 10 blocked_for_ms: 2000 fetch_paused: true }
      workers { processor: "billing" stream_id: 1 ready: true credit: 3 worker_name: "w1" }
      lanes_in_use: 1 lane_count: 64 pause_commands: "orders"
    )pb");
  });
  const Outcome run = Ferryctl({"status", Server(), "--timeout=20s"});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(run.out, HasSubstr("replica ferry-a  group orders-ferry"));
  EXPECT_THAT(run.out, HasSubstr("pause commands: orders"));
  EXPECT_THAT(run.out, HasSubstr("LOWEST-UNFINISHED"));
  EXPECT_THAT(run.out, HasSubstr("fetch-paused"));
  EXPECT_THAT(run.out, HasSubstr("billing"));
  EXPECT_THAT(run.err, IsEmpty());
  EXPECT_THAT(Calls(), ElementsAre("GetStatus"));
  absl::MutexLock lock(&fake_.mu);
  // No token given: no authorization metadata.
  EXPECT_THAT(fake_.authorizations, ElementsAre(""));
}

TEST_F(FerryctlTest, StatusJsonIsTheResponse) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.status_response = Parse<v1::GetStatusResponse>(R"pb(
      replica: "ferry-a" group_id: "g"
      partitions { topic: "orders" partition: 0 committed_offset: 7 end_offset: 9 lag: 2 }
    )pb");
  });
  const Outcome run = Ferryctl({"status", Server(), "--output=json"});
  EXPECT_EXIT_CODE(run, 0);
  v1::GetStatusResponse printed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &printed).ok()) << run.out;
  absl::MutexLock lock(&fake_.mu);
  EXPECT_TRUE(MessageDifferencer::Equals(printed, fake_.answers.status_response)) << run.out;
  EXPECT_EQ(run.out.find('\n'), run.out.size() - 1) << "one JSON object on one line";
}

TEST_F(FerryctlTest, PauseSelectedPartitions) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.pause_response = Parse<v1::PauseResponse>(R"pb(
      partitions { topic: "orders" partition: 0 }
      partitions { topic: "orders" partition: 3 }
      control_offset: 41
    )pb");
  });
  const Outcome run = Ferryctl({"pause", "--topic", "orders", "--partitions", "0,3", Server()});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(run.out, HasSubstr("paused 2 partitions (control offset 41)"));
  EXPECT_THAT(run.out, HasSubstr("orders  0,3"));
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.pause_requests.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(
      fake_.pause_requests[0],
      Parse<v1::PauseRequest>(R"pb(topic: "orders" partitions: 0 partitions: 3)pb")))
      << fake_.pause_requests[0].DebugString();
}

TEST_F(FerryctlTest, PauseKafkaTopicSpellingWithRanges) {
  const Outcome run = Ferryctl({"pause", "--topic=orders:0-2,5", Server()});
  EXPECT_EXIT_CODE(run, 0);
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.pause_requests.size(), 1u);
  EXPECT_EQ(fake_.pause_requests[0].topic(), "orders");
  EXPECT_THAT(fake_.pause_requests[0].partitions(), ElementsAre(0, 1, 2, 5));
  EXPECT_FALSE(fake_.pause_requests[0].all());
}

TEST_F(FerryctlTest, ResumeAll) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.resume_response = Parse<v1::ResumeResponse>(R"pb(
      partitions { topic: "orders" partition: 0 }
      partitions { topic: "audit" partition: 0 }
      control_offset: 42
    )pb");
  });
  const Outcome run = Ferryctl({"resume", "--all", Server()});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(run.out, HasSubstr("resumed 2 partitions (control offset 42)"));
  EXPECT_THAT(run.out, HasSubstr("audit"));
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.resume_requests.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(fake_.resume_requests[0],
                                         Parse<v1::ResumeRequest>("all: true")))
      << fake_.resume_requests[0].DebugString();
}

TEST_F(FerryctlTest, SelectionUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"pause", Server()},                                  // nothing selected
           {"pause", "--all", "--topic=orders", Server()},       // both
           {"resume", "--partitions=0", Server()},               // partitions of what?
           {"pause", "--topic=orders", "--partitions=x", Server()},
           {"pause", "--topic=orders:1", "--partitions=2", Server()},
           {"pause", "--topic=orders:", Server()},
           {"pause", "--all", "--dry-run", Server()},            // not a pause flag
           {"pause", "--all", "--output=yaml", Server()},
       }) {
    const Outcome run = Ferryctl(args);
    EXPECT_EXIT_CODE(run, 2);
    EXPECT_THAT(run.err, HasSubstr("usage: ferryctl"));
  }
  EXPECT_THAT(Calls(), IsEmpty());
}

TEST_F(FerryctlTest, ResetToDatetimeSendsMilliseconds) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.reset_response = Parse<v1::ResetOffsetsResponse>(R"pb(
      partitions { topic: "orders" partition: 0 current_offset: 90 new_offset: 40
                   earliest_offset: 0 end_offset: 100 applied: true applied_by: "ferry-a" }
      control_offset: 43
    )pb");
  });
  const Outcome utc =
      Ferryctl({"reset", "--topic", "orders", "--to-datetime", "2026-12-01T10:00:00Z", Server()});
  EXPECT_EXIT_CODE(utc, 0);
  EXPECT_THAT(utc.out, HasSubstr("control offset 43: 1 of 1 partition applied"));
  EXPECT_THAT(utc.out, HasSubstr("ferry-a"));
  const Outcome offset = Ferryctl(
      {"reset", "--topic=orders", "--to_datetime=2026-12-01T12:00:00.250+02:00", Server()});
  EXPECT_EXIT_CODE(offset, 0);

  const int64_t expected = absl::ToUnixMillis(
      absl::FromCivil(absl::CivilSecond(2026, 12, 1, 10, 0, 0), absl::UTCTimeZone()));
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.reset_requests.size(), 2u);
  const v1::ResetOffsetsRequest& first = fake_.reset_requests[0];
  EXPECT_EQ(first.to_case(), v1::ResetOffsetsRequest::kToTimestampMs);
  EXPECT_EQ(first.to_timestamp_ms(), expected);
  EXPECT_EQ(first.topic(), "orders");
  EXPECT_THAT(first.partitions(), IsEmpty());
  EXPECT_FALSE(first.dry_run());
  EXPECT_EQ(first.wait_ms(), 0) << "no --wait: the server's default";
  EXPECT_EQ(fake_.reset_requests[1].to_timestamp_ms(), expected + 250);
}

TEST_F(FerryctlTest, ResetDryRunInBothSpellings) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.reset_response = Parse<v1::ResetOffsetsResponse>(R"pb(
      partitions { topic: "orders" partition: 3 current_offset: 90 new_offset: 0 }
      dry_run: true control_offset: -1
    )pb");
  });
  for (const char* flag : {"--dry-run", "--dry_run"}) {
    const Outcome run = Ferryctl({"reset", "--topic", "orders", "--partitions", "3", "--to-earliest",
                              flag, Server()});
    // applied=false is what a dry run answers: still exit 0.
    EXPECT_EXIT_CODE(run, 0);
    EXPECT_THAT(run.out, HasSubstr("dry run, nothing changed"));
  }
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.reset_requests.size(), 2u);
  for (const v1::ResetOffsetsRequest& request : fake_.reset_requests) {
    EXPECT_TRUE(request.dry_run());
    EXPECT_EQ(request.to_case(), v1::ResetOffsetsRequest::kToEarliest);
    EXPECT_THAT(request.partitions(), ElementsAre(3));
  }
}

TEST_F(FerryctlTest, ResetToOffsetZeroAndWait) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.reset_response = Parse<v1::ResetOffsetsResponse>(R"pb(
      partitions { topic: "orders" partition: 1 new_offset: 0 applied: true }
    )pb");
  });
  const Outcome run = Ferryctl(
      {"reset", "--topic=orders", "--partitions=1", "--to-offset=0", "--wait=2500ms", Server()});
  EXPECT_EXIT_CODE(run, 0);
  const Outcome latest = Ferryctl({"reset", "--topic=orders", "--to-latest", Server()});
  EXPECT_EXIT_CODE(latest, 0);
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.reset_requests.size(), 2u);
  EXPECT_EQ(fake_.reset_requests[0].to_case(), v1::ResetOffsetsRequest::kToOffset);
  EXPECT_EQ(fake_.reset_requests[0].to_offset(), 0);
  EXPECT_EQ(fake_.reset_requests[0].wait_ms(), 2500);
  EXPECT_EQ(fake_.reset_requests[1].to_case(), v1::ResetOffsetsRequest::kToLatest);
}

TEST_F(FerryctlTest, ResetNeedsExactlyOneTarget) {
  const Outcome two = Ferryctl({"reset", "--topic=orders", "--to-earliest", "--to-offset=5", Server()});
  EXPECT_EXIT_CODE(two, 2);
  EXPECT_THAT(two.err, HasSubstr("give exactly one of --to-datetime, --to-earliest, --to-latest, "
                                 "--to-offset (got --to-earliest and --to-offset)"));
  EXPECT_THAT(two.err, HasSubstr("usage: ferryctl reset --topic=T"));
  const Outcome none = Ferryctl({"reset", "--topic=orders", Server()});
  EXPECT_EXIT_CODE(none, 2);
  EXPECT_THAT(none.err, HasSubstr("(got none)"));
  const Outcome bad_time = Ferryctl({"reset", "--topic=orders", "--to-datetime=yesterday", Server()});
  EXPECT_EXIT_CODE(bad_time, 2);
  EXPECT_THAT(bad_time.err, HasSubstr("2026-12-01T10:00:00Z"));
  const Outcome no_topic = Ferryctl({"reset", "--to-latest", Server()});
  EXPECT_EXIT_CODE(no_topic, 2);
  EXPECT_THAT(no_topic.err, HasSubstr("--topic=T is required"));
  EXPECT_THAT(Calls(), IsEmpty());
}

TEST_F(FerryctlTest, ResetNotAppliedExits3) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.reset_response = Parse<v1::ResetOffsetsResponse>(R"pb(
      partitions { topic: "orders" partition: 0 new_offset: 4 applied: true applied_by: "ferry-a" }
      partitions { topic: "orders" partition: 1 new_offset: 4 applied: false }
      control_offset: 44
    )pb");
  });
  const Outcome run = Ferryctl({"reset", "--topic=orders", "--to-offset=4", Server()});
  EXPECT_EXIT_CODE(run, 3);
  EXPECT_THAT(run.out, HasSubstr("1 of 2 partitions applied"));
  EXPECT_THAT(run.out, HasSubstr("not applied in time"));
  // Also with --output=json: scripts get the code without parsing.
  const Outcome json = Ferryctl({"reset", "--topic=orders", "--to-offset=4", "--output=json", Server()});
  EXPECT_EXIT_CODE(json, 3);
  EXPECT_THAT(json.out, HasSubstr("\"applied\":false"));
}

TEST_F(FerryctlTest, Skip) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.skip_response =
        Parse<v1::SkipOffsetResponse>(R"pb(outcome: "dead_lettered" applied_by: "ferry-b")pb");
  });
  const Outcome run =
      Ferryctl({"skip", "--topic", "orders", "--partition", "3", "--offset", "1234", Server()});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(run.out, HasSubstr("orders/3 offset 1234: dead_lettered"));
  EXPECT_THAT(run.out, HasSubstr("applied by ferry-b"));
  const Outcome missing = Ferryctl({"skip", "--topic", "orders", "--offset", "1234", Server()});
  EXPECT_EXIT_CODE(missing, 2);
  EXPECT_THAT(missing.err, HasSubstr("--partition is required"));
  absl::MutexLock lock(&fake_.mu);
  ASSERT_EQ(fake_.skip_requests.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(
      fake_.skip_requests[0],
      Parse<v1::SkipOffsetRequest>(R"pb(topic: "orders" partition: 3 offset: 1234)pb")))
      << fake_.skip_requests[0].DebugString();
}

TEST_F(FerryctlTest, ErrorResponseExits1WithTheCode) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.error = grpc::Status(grpc::StatusCode::NOT_FOUND,
                               "topic \"x\" is not consumed by ferry (topics: orders)");
  });
  const Outcome run = Ferryctl({"pause", "--topic=x", Server()});
  EXPECT_EXIT_CODE(run, 1);
  EXPECT_EQ(run.err, "ferryctl: NOT_FOUND: topic \"x\" is not consumed by ferry (topics: orders)\n");
  EXPECT_THAT(run.out, IsEmpty());

  fake_.Configure([](FakeControl::Answers& answers) {
    answers.error = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "offset 5 is not in flight");
  });
  const Outcome skip = Ferryctl({"skip", "--topic=orders", "--partition=0", "--offset=5", Server()});
  EXPECT_EXIT_CODE(skip, 1);
  EXPECT_EQ(skip.err, "ferryctl: FAILED_PRECONDITION: offset 5 is not in flight\n");
}

TEST_F(FerryctlTest, UnreachableServerExits1) {
  const int port = port_;
  server_->Shutdown();
  server_.reset();
  // Nothing listens there any more (the port stays reserved for a while
  // after close, and ferryctl fails fast on a refused connection).
  const Outcome run = Ferryctl({"status", absl::StrCat("--server=127.0.0.1:", port), "--timeout=20s"});
  EXPECT_EXIT_CODE(run, 1);
  EXPECT_THAT(run.err, HasSubstr("ferryctl: UNAVAILABLE"));
}

TEST_F(FerryctlTest, BearerTokenFromFileOrEnvironment) {
  const std::string token_file = TempPath("token");
  std::ofstream(token_file) << "s3cret\n";
  EXPECT_EXIT_CODE(Ferryctl({"status", Server(), "--token_file=" + token_file}), 0);
  EXPECT_EXIT_CODE(Ferryctl({"status", Server()}, {"FERRY_CONTROL_TOKEN=from-env"}), 0);
  // The file wins over the environment; the dashed spelling works too.
  EXPECT_EXIT_CODE(
      Ferryctl({"status", Server(), "--token-file", token_file}, {"FERRY_CONTROL_TOKEN=other"}),
      0);
  {
    absl::MutexLock lock(&fake_.mu);
    EXPECT_THAT(fake_.authorizations,
                ElementsAre("Bearer s3cret", "Bearer from-env", "Bearer s3cret"));
  }
  const Outcome missing = Ferryctl({"status", Server(), "--token_file=" + TempPath("no-such-file")});
  EXPECT_EXIT_CODE(missing, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read --token_file="));
  EXPECT_EQ(Calls().size(), 3u);
}

TEST_F(FerryctlTest, MutualTls) {
  const std::string dir = "clients/ferryctl/testdata/";
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ReadFile(dir + "ca.pem");
  options.pem_key_cert_pairs.push_back(
      {ReadFile(dir + "server.key"), ReadFile(dir + "server.pem")});
  ASSERT_FALSE(options.pem_root_certs.empty());
  StartServer(grpc::SslServerCredentials(options));

  // The certificate names ferry.test, not 127.0.0.1: --tls_server_name.
  const Outcome run = Ferryctl({"status", Server(), "--tls_ca=" + dir + "ca.pem",
                            "--tls_cert=" + dir + "client.pem", "--tls_key=" + dir + "client.key",
                            "--tls-server-name=ferry.test"});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(Calls(), ElementsAre("GetStatus"));

  // Without a client certificate the handshake fails: a failed call.
  const Outcome no_cert = Ferryctl(
      {"status", Server(), "--tls_ca=" + dir + "ca.pem", "--tls_server_name=ferry.test"});
  EXPECT_EXIT_CODE(no_cert, 1);
  EXPECT_THAT(no_cert.err, HasSubstr("ferryctl: UNAVAILABLE"));
  // A plaintext client cannot talk to it either.
  EXPECT_EXIT_CODE(Ferryctl({"status", Server()}), 1);
  // Client certificate flags without TLS are a usage error.
  const Outcome no_ca = Ferryctl({"status", Server(), "--tls_cert=" + dir + "client.pem",
                              "--tls_key=" + dir + "client.key"});
  EXPECT_EXIT_CODE(no_ca, 2);
  EXPECT_THAT(no_ca.err, HasSubstr("add --tls_ca=CA.pem"));
  EXPECT_THAT(Calls(), ElementsAre("GetStatus"));
}

TEST_F(FerryctlTest, MetricsViewTakesRatesFromTwoGetStatusAnswers) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.status_responses = {
        Parse<v1::GetStatusResponse>(R"pb(sampled_at_ms: 1000 counters { records_consumed: 100 }
          partitions { topic: "orders" partition: 0 committed_offset: 10 })pb"),
        Parse<v1::GetStatusResponse>(R"pb(
          sampled_at_ms: 3000 counters { records_consumed: 500 }
          partitions { topic: "orders" partition: 0 end_offset: 90 committed_offset: 50 lag: 40
                       lowest_unfinished_offset: -1 })pb")};
  });
  const Outcome run = Ferryctl({"status", "--metrics", Server(), "--interval=100ms"});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("ferry at 127.0.0.1:", port_)));
  EXPECT_THAT(run.out, HasSubstr("consumed=200"));  // 400 records in 2 s
  EXPECT_THAT(run.out, ContainsRegex("orders +0 +90 +50 +40 +20 "));  // 40 commits in 2 s
  EXPECT_THAT(Calls(), ElementsAre("GetStatus", "GetStatus"));
  // The old form named the /metrics address: a usage error saying what to write.
  const Outcome old = Ferryctl({"status", "--metrics=127.0.0.1:9464"});
  EXPECT_EXIT_CODE(old, 2);
  EXPECT_THAT(old.err, HasSubstr("--metrics takes no address"));
  const Outcome mixed = Ferryctl({"status", "--metrics", "--output=json"});
  EXPECT_EXIT_CODE(mixed, 2);
  EXPECT_THAT(mixed.err, HasSubstr("--output does not apply to ferryctl status --metrics"));
  EXPECT_THAT(Calls(), ElementsAre("GetStatus", "GetStatus"));
  fake_.Configure([](FakeControl::Answers& answers) { answers.error = grpc::Status(grpc::UNAVAILABLE, "down"); });
  const Outcome failed = Ferryctl({"status", "--metrics", Server(), "--interval=100ms"});
  EXPECT_EXIT_CODE(failed, 1);
  EXPECT_THAT(failed.err, HasSubstr("ferryctl: UNAVAILABLE: down"));
}

TEST_F(FerryctlTest, UsageAndHelp) {
  const Outcome unknown = Ferryctl({"rewind", Server()});
  EXPECT_EXIT_CODE(unknown, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command \"rewind\""));
  EXPECT_THAT(unknown.err, HasSubstr("commands: status, pause, resume, reset, skip"));
  const Outcome none = Ferryctl({});
  EXPECT_EXIT_CODE(none, 2);
  const Outcome flag = Ferryctl({"status", "--bogus"});
  EXPECT_EXIT_CODE(flag, 2);
  EXPECT_THAT(flag.err, HasSubstr("unknown flag --bogus"));
  const Outcome help = Ferryctl({"--help"});
  EXPECT_EXIT_CODE(help, 0);
  EXPECT_THAT(help.out, HasSubstr("Exit codes:"));
  EXPECT_THAT(help.out, HasSubstr("3  reset: not every partition was applied"));
  EXPECT_THAT(Calls(), IsEmpty());
}

}  // namespace
}  // namespace ferry::ferryctl
