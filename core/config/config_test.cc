// ParseConfig and LoadConfigFile on whole documents: every key set, the
// defaults, the document's structure (unknown and repeated keys, YAML syntax,
// empty documents), environment variables, and loading a file. The sections'
// own values and errors are in config_{scalars,routing,service,scheduling}_test.cc.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/config/config_test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;
using ::ferry::testing::ExpectError;
using ::ferry::testing::TestTmpDir;
using ::ferry::testing::WriteTempFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// A config that sets every key of the sections it lists.
constexpr char kFullYaml[] = R"(# every key set
kafka:
  bootstrap.servers: broker-1:9092,broker-2:9092
  group.id: payments
  session.timeout.ms: 6000
  enable.auto.commit: false
  allow.auto.create.topics: true
topics:
  - name: orders
    ordering: partition
    key: header:order-id
    type: json:/meta/type
  - name: clicks
    ordering: unordered
    key: json:/user/id
    type: const:click
  - name: audit
    ordering: key
    key: record_key
    type: topic
processors:
  - name: billing
    target: dns:///billing:50051
    event_types: [order.created, order.paid]
    streams: 4
    max_in_flight: 32
    max_batch: 8
    max_batch_bytes: 1MiB
    timeout: 1500ms
  - name: default
    target: ipv4:127.0.0.1:50051,127.0.0.1:50052
    event_types: ["*"]
lanes:
  count: 128
  capacity: 1000
budgets:
  max_buffered_events: 5000
  max_buffered_bytes: 64MiB
  resume_fraction: 0.25
commit:
  interval: 250ms
shutdown:
  grace: 1m
log:
  progress_interval: 0s
server:
  listen: 0.0.0.0:0
embedded:
  partitions: 3
  bootstrap_file: /tmp/ferry-bootstrap
)";

TEST(ConfigTest, FullConfigKafkaAndTopics) {
  absl::StatusOr<Config> config = ParseConfig(kFullYaml, "full.yaml");
  ASSERT_TRUE(config.ok()) << config.status();

  EXPECT_THAT(config->kafka,
              UnorderedElementsAre(
                  Pair("bootstrap.servers", "broker-1:9092,broker-2:9092"),
                  Pair("group.id", "payments"),
                  Pair("session.timeout.ms", "6000"),
                  Pair("enable.auto.commit", "false"),
                  Pair("allow.auto.create.topics", "true")));
  EXPECT_FALSE(config->UsesEmbeddedCluster());

  ASSERT_EQ(config->topics.size(), 3u);
  EXPECT_EQ(config->topics[0].name, "orders");
  EXPECT_EQ(config->topics[0].ordering, Ordering::kPartition);
  EXPECT_EQ(config->topics[0].key.kind, FieldSource::Kind::kHeader);
  EXPECT_EQ(config->topics[0].key.argument, "order-id");
  EXPECT_EQ(config->topics[0].type.kind, FieldSource::Kind::kJson);
  EXPECT_EQ(config->topics[0].type.argument, "/meta/type");
  EXPECT_EQ(config->topics[1].name, "clicks");
  EXPECT_EQ(config->topics[1].ordering, Ordering::kUnordered);
  EXPECT_EQ(config->topics[1].key.kind, FieldSource::Kind::kJson);
  EXPECT_EQ(config->topics[1].key.argument, "/user/id");
  EXPECT_EQ(config->topics[1].type.kind, FieldSource::Kind::kConstant);
  EXPECT_EQ(config->topics[1].type.argument, "click");
  EXPECT_EQ(config->topics[2].ordering, Ordering::kKey);
  EXPECT_EQ(config->topics[2].key.kind, FieldSource::Kind::kRecordKey);
  EXPECT_EQ(config->topics[2].type.kind, FieldSource::Kind::kTopic);
}

TEST(ConfigTest, FullConfigProcessors) {
  absl::StatusOr<Config> config = ParseConfig(kFullYaml, "full.yaml");
  ASSERT_TRUE(config.ok()) << config.status();

  ASSERT_EQ(config->processors.size(), 2u);
  const ProcessorConfig& billing = config->processors[0];
  EXPECT_EQ(billing.name, "billing");
  EXPECT_EQ(billing.target, "dns:///billing:50051");
  EXPECT_THAT(billing.event_types, ElementsAre("order.created", "order.paid"));
  EXPECT_EQ(billing.streams, 4);
  EXPECT_EQ(billing.max_in_flight, 32);
  EXPECT_EQ(billing.max_batch, 8);
  EXPECT_EQ(billing.max_batch_bytes, 1 << 20);
  EXPECT_EQ(billing.timeout, absl::Milliseconds(1500));
  const ProcessorConfig& fallback = config->processors[1];
  EXPECT_EQ(fallback.name, "default");
  EXPECT_EQ(fallback.target, "ipv4:127.0.0.1:50051,127.0.0.1:50052");
  EXPECT_THAT(fallback.event_types, ElementsAre("*"));
  EXPECT_EQ(fallback.streams, 2);
  EXPECT_EQ(fallback.timeout, absl::Seconds(30));
}

TEST(ConfigTest, FullConfigSettings) {
  absl::StatusOr<Config> config = ParseConfig(kFullYaml, "full.yaml");
  ASSERT_TRUE(config.ok()) << config.status();

  EXPECT_EQ(config->lane_count, 128);
  EXPECT_EQ(config->lane_capacity, 1000);
  EXPECT_EQ(config->max_buffered_events, 5000);
  EXPECT_EQ(config->max_buffered_bytes, int64_t{64} << 20);
  EXPECT_DOUBLE_EQ(config->resume_fraction, 0.25);
  EXPECT_EQ(config->commit_interval, absl::Milliseconds(250));
  EXPECT_EQ(config->shutdown_grace, absl::Minutes(1));
  EXPECT_EQ(config->progress_interval, absl::ZeroDuration());
  EXPECT_EQ(config->listen_address, "0.0.0.0:0");
  EXPECT_EQ(config->embedded_partitions, 3);
  EXPECT_EQ(config->embedded_bootstrap_file, "/tmp/ferry-bootstrap");
}

TEST(ConfigTest, Defaults) {
  absl::StatusOr<Config> config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const Config defaults;
  EXPECT_THAT(config->kafka, ElementsAre(Pair("group.id", "ferry")));
  EXPECT_TRUE(config->UsesEmbeddedCluster());
  ASSERT_EQ(config->topics.size(), 1u);
  EXPECT_EQ(config->topics[0].ordering, Ordering::kKey);
  EXPECT_EQ(config->topics[0].key.kind, FieldSource::Kind::kRecordKey);
  EXPECT_EQ(config->topics[0].type.kind, FieldSource::Kind::kTopic);
  ASSERT_EQ(config->processors.size(), 1u);
  EXPECT_THAT(config->processors[0].event_types, ElementsAre("*"));
  EXPECT_EQ(config->processors[0].streams, 2);
  EXPECT_EQ(config->processors[0].max_in_flight, 256);
  EXPECT_EQ(config->processors[0].max_batch, 64);
  EXPECT_EQ(config->processors[0].timeout, absl::Seconds(30));
  // auto: 4 x (2 streams x 256 in flight).
  EXPECT_EQ(config->lane_count, 2048);
  EXPECT_EQ(config->lane_capacity, 4096);
  EXPECT_EQ(config->max_buffered_events, 50000);
  EXPECT_EQ(config->max_buffered_bytes, int64_t{256} << 20);
  EXPECT_DOUBLE_EQ(config->resume_fraction, 0.5);
  EXPECT_EQ(config->commit_interval, absl::Seconds(1));
  EXPECT_EQ(config->shutdown_grace, absl::Seconds(20));
  EXPECT_EQ(config->progress_interval, absl::Seconds(5));
  EXPECT_EQ(config->listen_address, "127.0.0.1:7070");
  EXPECT_EQ(config->embedded_partitions, 8);
  EXPECT_EQ(config->embedded_bootstrap_file, "");
}

TEST(ConfigTest, EmptySectionsKeepDefaults) {
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat(kMinimal, "kafka:\nlanes:\n"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 2048);
  EXPECT_THAT(config->kafka, ElementsAre(Pair("group.id", "ferry")));
}

TEST(ConfigTest, UnknownTopLevelKey) {
  std::string message =
      ExpectError(absl::StrCat(kMinimal, "lane:\n  count: 4\n"), 6, "lane");
  EXPECT_THAT(message, HasSubstr("unknown key"));
  EXPECT_THAT(message, HasSubstr("lanes"));
}

TEST(ConfigTest, UnknownNestedKey) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "lanes:\n  count: 4\n  cuont: 8\n"), 8,
      "lanes.cuont");
  EXPECT_EQ(message,
            "ferry.yaml:8: lanes.cuont: unknown key (known keys: count, "
            "capacity)");
  ExpectError(R"(topics:
  - name: orders
    keys: record_key
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
              3, "topics[0].keys");
  ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
  - name: other
    target: ipv4:127.0.0.1:50052
    event_types: [a]
    stream: 3
)",
              9, "processors[1].stream");
}

TEST(ConfigTest, DuplicateKey) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "lanes:\n  count: 4\n  count: 8\n"), 8,
      "lanes.count");
  EXPECT_THAT(message, HasSubstr("line 7"));
}

TEST(ConfigTest, YamlSyntaxError) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: [default
    target: ipv4:127.0.0.1:50051
)",
                                    5, "");
  EXPECT_THAT(message, HasSubstr("invalid YAML"));
  message = ExpectError("topics:\n  - name: a\n   bad: indent\n", 3, "");
  EXPECT_THAT(message, HasSubstr("invalid YAML"));
}

TEST(ConfigTest, EmptyOrNonMapDocument) {
  EXPECT_THAT(ExpectError("", 1, ""), HasSubstr("empty"));
  EXPECT_THAT(ExpectError("# only a comment\n", 1, ""), HasSubstr("empty"));
  EXPECT_THAT(ExpectError("- a\n- b\n", 1, ""), HasSubstr("got a list"));
  EXPECT_THAT(ExpectError("hello\n", 1, ""), HasSubstr("expected a map"));
  ExpectError(absl::StrCat(kMinimal, "---\n", kMinimal), 7, "");
}

TEST(ConfigTest, EmbeddedDefaultParses) {
  absl::StatusOr<Config> config =
      ParseConfig(EmbeddedDefaultConfigYaml(), "<embedded>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->UsesEmbeddedCluster());
  EXPECT_EQ(config->kafka.at("group.id"), "ferry-demo");
  ASSERT_EQ(config->topics.size(), 1u);
  EXPECT_EQ(config->topics[0].name, "events");
  EXPECT_EQ(config->topics[0].ordering, Ordering::kKey);
  ASSERT_EQ(config->processors.size(), 1u);
  EXPECT_EQ(config->processors[0].name, "default");
  EXPECT_EQ(config->processors[0].target, "ipv4:127.0.0.1:50051");
  EXPECT_EQ(config->processors[0].streams, 2);
  EXPECT_EQ(config->embedded_partitions, 8);
  EXPECT_EQ(config->progress_interval, absl::Seconds(2));
}

TEST(ConfigTest, LoadConfigFileMissing) {
  const std::string path = "/nonexistent/ferry-config-test.yaml";
  absl::StatusOr<Config> config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));
}

TEST(ConfigTest, LoadConfigFileReadsAndNamesTheFile) {
  const std::string dir = TestTmpDir();
  const std::string path = WriteTempFile("ferry_config_test.yaml",
                                         absl::StrCat(kMinimal, "lanes:\n  count: x\n"));
  absl::StatusOr<Config> config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith(absl::StrCat(path, ":7: lanes.count: ")));

  absl::StatusOr<Config> directory = LoadConfigFile(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigTest, EnvironmentVariablesExpand) {
  setenv("FERRY_TEST_POD_NAME", "ferry-7d9f-abcde", 1);
  setenv("FERRY_TEST_GROUP", "orders", 1);
  absl::StatusOr<Config> config = ParseConfig(absl::StrCat(R"(kafka:
  client.id: ${FERRY_TEST_POD_NAME}
  group.id: ferry-${FERRY_TEST_GROUP}-v1
)", kMinimal), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kafka.at("client.id"), "ferry-7d9f-abcde");
  EXPECT_EQ(config->kafka.at("group.id"), "ferry-orders-v1");

  unsetenv("FERRY_TEST_UNSET");
  std::string message = ExpectError(
      absl::StrCat("kafka:\n  client.id: ${FERRY_TEST_UNSET}\n", kMinimal), 2, "kafka.client.id");
  EXPECT_THAT(message, HasSubstr("environment variable FERRY_TEST_UNSET is not set"));
  message = ExpectError(absl::StrCat("kafka:\n  client.id: ${OOPS\n", kMinimal), 2,
                        "kafka.client.id");
  EXPECT_THAT(message, HasSubstr("without a closing"));
}

}  // namespace
}  // namespace ferry
