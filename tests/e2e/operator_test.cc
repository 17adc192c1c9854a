// What an operator sees of a running ferry (issue 20, items 8, 10 and 11),
// against the ferry binary and the mock cluster:
//   * reflection describes grpc.health.v1.Health, so a client with no local
//     health.proto (grpcurl) can call it, and the health status of
//     "ferry.v1.Control" is SERVING;
//   * one replica identity: dead letters' ferry.instance, GetStatus's
//     replica, ResetOffsets' applied_by and the log all name the replica the
//     same way — kafka.client.id when configured, else ferry-<host>/<pid>;
//   * `ferry --version` names ferry's version and its libraries'.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/e2e/reflection_client.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// ferry's gRPC port from its log, waiting for the line.
int WaitForFerryPort(Subprocess& ferry) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int port = FerryHealthPort(ferry.Log());
  while (port <= 0 && absl::Now() < deadline && !ferry.TryWait().has_value()) {
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's log
    port = FerryHealthPort(ferry.Log());
  }
  return port;
}

// Asks Health/Check for `service` using only the descriptors reflection
// served (as grpcurl does); the status's enum name, or the call's error.
absl::StatusOr<std::string> CheckThroughReflection(
    ReflectionClient& client, const google::protobuf::DescriptorPool& pool,
    const std::string& service) {
  google::protobuf::DynamicMessageFactory factory(&pool);
  const google::protobuf::Descriptor* request_type =
      pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest");
  const google::protobuf::Descriptor* response_type =
      pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse");
  if (request_type == nullptr || response_type == nullptr) {
    return absl::NotFoundError("health messages not served");
  }
  std::unique_ptr<google::protobuf::Message> request(factory.GetPrototype(request_type)->New());
  request->GetReflection()->SetString(request.get(), request_type->FindFieldByName("service"),
                                      service);
  absl::StatusOr<std::string> bytes =
      client.UnaryCall("/grpc.health.v1.Health/Check", request->SerializeAsString());
  if (!bytes.ok()) return bytes.status();
  std::unique_ptr<google::protobuf::Message> response(factory.GetPrototype(response_type)->New());
  if (!response->ParseFromString(*bytes)) return absl::InternalError("bad HealthCheckResponse");
  return response->GetReflection()
      ->GetEnum(*response, response_type->FindFieldByName("status"))
      ->name();
}

TEST(OperatorTest, ReflectionDescribesHealthAndControlHasAHealthStatus) {
  absl::StatusOr<MockCluster> cluster = StartMockCluster("health", 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, "health-group", "health", "ipv4:127.0.0.1:1", 1),
      "ferry-health");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const int port = WaitForFerryPort(*ferry);
  ASSERT_GT(port, 0) << LogTail(*ferry);
  ReflectionClient client(absl::StrCat("127.0.0.1:", port));

  // `grpcurl describe grpc.health.v1.Health`
  absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>> files =
      client.FileContainingSymbol("grpc.health.v1.Health");
  ASSERT_TRUE(files.ok()) << files.status();
  google::protobuf::DescriptorPool pool;
  for (const google::protobuf::FileDescriptorProto& file : *files) {
    ASSERT_NE(pool.BuildFile(file), nullptr) << file.name();
  }
  const google::protobuf::ServiceDescriptor* health =
      pool.FindServiceByName("grpc.health.v1.Health");
  ASSERT_NE(health, nullptr);
  ASSERT_NE(health->FindMethodByName("Check"), nullptr);
  ASSERT_NE(health->FindMethodByName("Watch"), nullptr);
  EXPECT_TRUE(health->FindMethodByName("Watch")->server_streaming());
  EXPECT_EQ(health->FindMethodByName("Check")->input_type()->full_name(),
            "grpc.health.v1.HealthCheckRequest");

  // `grpcurl -d '{"service": ...}' grpc.health.v1.Health/Check`, with no
  // local health.proto.
  EXPECT_EQ(CheckThroughReflection(client, pool, "").value_or("error"), "SERVING");
  EXPECT_EQ(CheckThroughReflection(client, pool, "ferry.v1.Control").value_or("error"),
            "SERVING");
  absl::StatusOr<std::string> unknown = CheckThroughReflection(client, pool, "no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
  // And ferry's own service stays describable.
  EXPECT_TRUE(client.FileContainingSymbol("ferry.v1.Control").ok());

  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
}

// A mock cluster with `topic` and `topic`-dlq.
absl::StatusOr<MockCluster> StartClusterWithDeadLetters(const std::string& topic) {
  const std::string bootstrap_file = TempPath("bootstrap-" + topic);
  absl::StatusOr<Subprocess> process = Subprocess::Start(
      {"tests/tools/kafka_tool", "mock", "--partitions=2",
       absl::StrCat("--topics=", topic, ",", topic, "-dlq"),
       absl::StrCat("--bootstrap_file=", bootstrap_file)},
      TempPath("mock-" + topic + ".log"));
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> bootstrap = WaitForFile(bootstrap_file, absl::Seconds(30));
  if (!bootstrap.ok()) return bootstrap.status();
  return MockCluster{*std::move(process), std::string(absl::StripAsciiWhitespace(*bootstrap))};
}

// Runs ferry over `topic` with every event failing into the dead-letter
// topic (with `client_id` as kafka.client.id unless empty), and returns the
// name each place gives the replica; checks they all agree.
std::string IdentityEverywhere(const std::string& topic, const std::string& client_id,
                               pid_t* ferry_pid) {
  constexpr int kEvents = 10;
  absl::StatusOr<MockCluster> cluster = StartClusterWithDeadLetters(topic);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return "";
  EXPECT_TRUE(Produce(cluster->bootstrap, topic, kEvents, 2, 2).ok());
  absl::StatusOr<Worker> worker = StartWorker(topic, 16, 0, {"--fail_every=1"});
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return "";
  const std::string group = topic + "-group";
  std::vector<std::pair<std::string, std::string>> kafka;
  if (!client_id.empty()) kafka.emplace_back("client.id", client_id);
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfigWithKafka(cluster->bootstrap, group, topic,
                           absl::StrCat("ipv4:127.0.0.1:", worker->port), 1, kafka,
                           absl::StrCat("failures:\n  dead_letter_topic: ", topic, "-dlq\n")),
      "ferry-" + topic);
  EXPECT_TRUE(ferry.ok()) << ferry.status();
  if (!ferry.ok()) return "";
  *ferry_pid = ferry->pid();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, topic, group, kEvents, *ferry, absl::Seconds(120));
  EXPECT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);
  if (!progress.ok()) return "";

  // GetStatus's replica.
  auto stub = v1::Control::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", FerryHealthPort(ferry->Log())),
      grpc::InsecureChannelCredentials()));
  v1::GetStatusResponse status;
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    EXPECT_TRUE(stub->GetStatus(&context, v1::GetStatusRequest(), &status).ok());
  }
  const std::string replica = status.replica();
  EXPECT_FALSE(replica.empty());
  // ResetOffsets' applied_by (to the end: nothing is left to process).
  v1::ResetOffsetsRequest reset;
  reset.set_topic(topic);
  reset.set_to_latest(true);
  reset.set_wait_ms(20000);
  v1::ResetOffsetsResponse reset_response;
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Status reset_status = stub->ResetOffsets(&context, reset, &reset_response);
    EXPECT_TRUE(reset_status.ok()) << reset_status.error_message();
  }
  EXPECT_EQ(reset_response.partitions_size(), 2);
  for (const v1::PartitionReset& partition : reset_response.partitions()) {
    EXPECT_TRUE(partition.applied()) << partition.error();
    EXPECT_EQ(partition.applied_by(), replica);
  }
  // The log.
  EXPECT_THAT(ferry->Log(), HasSubstr(absl::StrCat(" processors, replica ", replica, "\n")));
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  EXPECT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);

  // Every dead letter's ferry.instance.
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster->bootstrap, topic + "-dlq");
  EXPECT_TRUE(dead.ok()) << dead.status();
  if (!dead.ok()) return "";
  EXPECT_EQ(dead->size(), static_cast<size_t>(kEvents));
  std::set<std::string> instances;
  for (const test_tools::ConsumedRecord& record : *dead) {
    instances.insert(record.Header("ferry.instance"));
  }
  EXPECT_THAT(instances, ElementsAre(replica));
  return replica;
}

TEST(OperatorTest, AConfiguredClientIdNamesTheReplicaEverywhere) {
  pid_t pid = 0;
  EXPECT_EQ(IdentityEverywhere("identity-set", "orders-ferry-0", &pid), "orders-ferry-0");
}

TEST(OperatorTest, WithoutAClientIdTheReplicaIsFerryHostPidEverywhere) {
  pid_t pid = 0;
  const std::string replica = IdentityEverywhere("identity-default", "", &pid);
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(replica, absl::StrCat("ferry-", host, "/", pid));
}

TEST(OperatorTest, VersionNamesFerryAndItsLibraries) {
  absl::StatusOr<Subprocess> ferry =
      Subprocess::Start({"server/ferry", "--version"}, TempPath("ferry-version.log"));
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ASSERT_EQ(ferry->Wait(absl::Seconds(30)).value_or(-1), 0) << ferry->Log();
  const std::string text = ferry->Log();
  EXPECT_THAT(text, HasSubstr("ferry 0."));
  EXPECT_THAT(text, HasSubstr("\nlibrdkafka 2."));
  EXPECT_THAT(text, HasSubstr("\ngRPC 1."));
  EXPECT_THAT(text, HasSubstr("\nprotobuf 3."));
  EXPECT_THAT(text, HasSubstr("\nabseil 20"));
  // abseil's default text, which told nothing but the build mode.
  EXPECT_THAT(text, Not(HasSubstr("NDEBUG not #defined")));
}

}  // namespace
}  // namespace ferry::testing
