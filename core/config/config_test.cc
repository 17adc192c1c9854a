#include "core/config/config.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;
using ::ferry::testing::TestTmpDir;
using ::ferry::testing::WriteTempFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// Parses `yaml` and expects an InvalidArgument error that starts with
// `ferry.yaml:<line>: <path>:`; returns the message for further checks.
std::string ExpectError(const std::string& yaml, int line,
                        const std::string& path) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "ferry.yaml");
  EXPECT_FALSE(config.ok()) << "parsed unexpectedly:\n" << yaml;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string prefix =
      path.empty() ? absl::StrCat("ferry.yaml:", line, ": ")
                   : absl::StrCat("ferry.yaml:", line, ": ", path, ": ");
  EXPECT_THAT(std::string(config.status().message()), StartsWith(prefix))
      << "yaml:\n"
      << yaml;
  return std::string(config.status().message());
}

TEST(ConfigTest, FullConfig) {
  constexpr char kYaml[] = R"(# every key set
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
  absl::StatusOr<Config> config = ParseConfig(kYaml, "full.yaml");
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
  EXPECT_EQ(config->max_buffered_events, 100000);
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

TEST(ConfigTest, LaneCountFollowsTheProcessorsCreditUnlessSet) {
  const std::string two_processors = R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:1
    streams: 1
    max_in_flight: 10
    event_types: [x]
  - name: b
    target: ipv4:127.0.0.1:2
    streams: 3
    max_in_flight: 100
)";
  // 4 x (10 + 300) = 1240, rounded up to a power of two.
  absl::StatusOr<Config> config = ParseConfig(two_processors, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 2048);
  config = ParseConfig(absl::StrCat(two_processors, "lanes:\n  count: auto\n"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 2048);
  config = ParseConfig(absl::StrCat(two_processors, "lanes:\n  count: 100\n"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 100);

  ProcessorConfig small;
  small.streams = 1;
  small.max_in_flight = 1;
  EXPECT_EQ(AutoLaneCount({small}), 64);  // the floor
  ProcessorConfig huge;
  huge.streams = 64;
  huge.max_in_flight = 4096;
  EXPECT_EQ(AutoLaneCount({huge}), 16384);  // the ceiling
  EXPECT_EQ(AutoLaneCount({}), 64);
}

TEST(ConfigTest, ByteSizes) {
  const std::pair<const char*, int64_t> kCases[] = {
      {"1000", 1000},
      {"512B", 512},
      {"4KiB", 4096},
      {"2 MiB", 2 << 20},
      {"1GiB", int64_t{1} << 30},
      {"3KB", 3000},
      {"5MB", 5000000},
      {"2GB", 2000000000},
  };
  for (const auto& [text, bytes] : kCases) {
    absl::StatusOr<Config> config = ParseConfig(
        absl::StrCat(kMinimal, "budgets:\n  max_buffered_bytes: ", text, "\n"),
        "ferry.yaml");
    ASSERT_TRUE(config.ok()) << text << ": " << config.status();
    EXPECT_EQ(config->max_buffered_bytes, bytes) << text;
  }
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "budgets:\n  max_buffered_bytes: 12 parsecs\n"),
      7, "budgets.max_buffered_bytes");
  EXPECT_THAT(message, HasSubstr("MiB"));
}

TEST(ConfigTest, KafkaValuesBecomeStrings) {
  absl::StatusOr<Config> config = ParseConfig(
      absl::StrCat(kMinimal,
                   "kafka:\n  fetch.wait.max.ms: 100\n  enable.idempotence: "
                   "True\n  client.id: \"007\"\n"),
      "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kafka.at("fetch.wait.max.ms"), "100");
  EXPECT_EQ(config->kafka.at("enable.idempotence"), "true");
  EXPECT_EQ(config->kafka.at("client.id"), "007");
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

TEST(ConfigTest, BadDuration) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    timeout: 3 sec
)",
                                    6, "processors[0].timeout");
  EXPECT_THAT(message, HasSubstr("invalid duration \"3 sec\""));
  EXPECT_THAT(message, HasSubstr("30s"));

  message = ExpectError(absl::StrCat(kMinimal, "commit:\n  interval: -1s\n"),
                        7, "commit.interval");
  EXPECT_THAT(message, HasSubstr("negative"));
  message = ExpectError(absl::StrCat(kMinimal, "commit:\n  interval: 0s\n"), 7,
                        "commit.interval");
  EXPECT_THAT(message, HasSubstr("greater than zero"));
  ExpectError(absl::StrCat(kMinimal, "commit:\n  interval: inf\n"), 7,
              "commit.interval");
}

TEST(ConfigTest, BareIntegerDuration) {
  std::string message =
      ExpectError(absl::StrCat(kMinimal, "shutdown:\n  grace: 20\n"), 7,
                  "shutdown.grace");
  EXPECT_THAT(message, HasSubstr("no unit"));
  EXPECT_THAT(message, HasSubstr("20s"));
}

TEST(ConfigTest, ZeroOrNegativeInt) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "lanes:\n  count: 0\n"), 7, "lanes.count");
  EXPECT_THAT(message, HasSubstr("at least 1"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    max_in_flight: -5
)",
                        6, "processors[0].max_in_flight");
  EXPECT_THAT(message, HasSubstr("at least 1"));
  message = ExpectError(
      absl::StrCat(kMinimal, "embedded:\n  partitions: 99999999999\n"), 7,
      "embedded.partitions");
  EXPECT_THAT(message, HasSubstr("at most"));
  message = ExpectError(absl::StrCat(kMinimal, "lanes:\n  capacity: 1.5\n"), 7,
                        "lanes.capacity");
  EXPECT_THAT(message, HasSubstr("whole number"));
  message = ExpectError(
      absl::StrCat(kMinimal, "budgets:\n  resume_fraction: 1\n"), 7,
      "budgets.resume_fraction");
  EXPECT_THAT(message, HasSubstr("less than 1"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    max_batch_bytes: 100B
)",
                        6, "processors[0].max_batch_bytes");
  EXPECT_THAT(message, HasSubstr("at least 1KiB"));
}

TEST(ConfigTest, WrongType) {
  std::string message = ExpectError(R"(topics:
  name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                    2, "topics");
  EXPECT_THAT(message, HasSubstr("expected a list"));
  EXPECT_THAT(message, HasSubstr("got a map"));

  message = ExpectError(absl::StrCat(kMinimal, "lanes:\n  count: many\n"), 7,
                        "lanes.count");
  EXPECT_THAT(message, HasSubstr("expected an integer"));
  EXPECT_THAT(message, HasSubstr("\"many\""));

  message = ExpectError(absl::StrCat(kMinimal, "lanes: 64\n"), 6, "lanes");
  EXPECT_THAT(message, HasSubstr("expected a map"));

  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    event_types: order.created
)",
                        6, "processors[0].event_types");
  EXPECT_THAT(message, HasSubstr("expected a list"));

  message = ExpectError(
      absl::StrCat(kMinimal, "kafka:\n  bootstrap.servers: [a, b]\n"), 7,
      "kafka.bootstrap.servers");
  EXPECT_THAT(message, HasSubstr("got a list"));

  ExpectError("topics:\n  - orders\nprocessors:\n  - name: a\n    target: t\n",
              2, "topics[0]");
}

TEST(ConfigTest, BadFieldSourceAndOrdering) {
  std::string message = ExpectError(R"(topics:
  - name: orders
    key: json:user/id
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                    3, "topics[0].key");
  EXPECT_THAT(message, HasSubstr("must start with '/'"));
  message = ExpectError(R"(topics:
  - name: orders
    type: headers:x
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        3, "topics[0].type");
  EXPECT_THAT(message, HasSubstr("record_key, header:NAME"));
  message = ExpectError(R"(topics:
  - name: orders
    ordering: strict
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        3, "topics[0].ordering");
  EXPECT_THAT(message, HasSubstr("key, partition or unordered"));
}

TEST(ConfigTest, BadListenAddress) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "server:\n  listen: 7070\n"), 7, "server.listen");
  EXPECT_THAT(message, HasSubstr("host:port"));
  ExpectError(absl::StrCat(kMinimal, "server:\n  listen: host:99999\n"), 7,
              "server.listen");
  absl::StatusOr<Config> config = ParseConfig(
      absl::StrCat(kMinimal, "server:\n  listen: \"[::1]:7070\"\n"), "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen_address, "[::1]:7070");
}

TEST(ConfigTest, MetricsListenDefaultsFollowServerListen) {
  const std::pair<const char*, const char*> kCases[] = {
      {"", "127.0.0.1:9464"},
      {"server:\n  listen: 0.0.0.0:7070\n", "0.0.0.0:9464"},
      {"server:\n  listen: 127.0.0.1:0\n", "127.0.0.1:0"},
      {"server:\n  listen: \"[::1]:7070\"\n", "[::1]:9464"},
  };
  for (const auto& [section, expected] : kCases) {
    absl::StatusOr<Config> config =
        ParseConfig(absl::StrCat(kMinimal, section), "f.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->metrics_listen_address, expected) << section;
  }
  EXPECT_EQ(Config().metrics_listen_address, "127.0.0.1:9464");
}

TEST(ConfigTest, MetricsListenExplicitOrOff) {
  absl::StatusOr<Config> config = ParseConfig(
      absl::StrCat(kMinimal,
                   "server:\n  listen: 127.0.0.1:0\n  metrics_listen: 0.0.0.0:9100\n"),
      "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->metrics_listen_address, "0.0.0.0:9100");
  config = ParseConfig(absl::StrCat(kMinimal, "server:\n  metrics_listen: off\n"),
                       "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->metrics_listen_address, "");
}

TEST(ConfigTest, BadMetricsListen) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal, "server:\n  listen: 127.0.0.1:0\n  metrics_listen: 9464\n"), 8,
      "server.metrics_listen");
  EXPECT_THAT(message, HasSubstr("host:port"));
  message = ExpectError(absl::StrCat(kMinimal, "server:\n  metrics: 1\n"), 7,
                        "server.metrics");
  EXPECT_THAT(message, HasSubstr("listen, metrics_listen"));
}

TEST(ConfigTest, LogFormat) {
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat(kMinimal, "log:\n  format: json\n"), "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_format, "json");
  config = ParseConfig(kMinimal, "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_format, "");
  std::string message =
      ExpectError(absl::StrCat(kMinimal, "log:\n  format: xml\n"), 7, "log.format");
  EXPECT_THAT(message, HasSubstr("text or json"));
}

TEST(ConfigTest, MissingTopics) {
  std::string message = ExpectError(R"(kafka:
  group.id: g
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                    1, "topics");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(R"(topics: []
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        1, "topics");
  EXPECT_THAT(message, HasSubstr("at least one topic"));
  ExpectError(R"(topics:
  - ordering: key
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
              2, "topics[0].name");
}

TEST(ConfigTest, MissingProcessors) {
  std::string message =
      ExpectError("topics:\n  - name: orders\n", 1, "processors");
  EXPECT_THAT(message, HasSubstr("missing"));
}

TEST(ConfigTest, MissingProcessorTarget) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
    event_types: [x]
  - name: b
    streams: 1
)",
                                    7, "processors[1].target");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ""
)",
                        5, "processors[0].target");
  EXPECT_THAT(message, HasSubstr("must not be empty"));
}

TEST(ConfigTest, DuplicateProcessorNames) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: workers
    target: ipv4:127.0.0.1:50051
    event_types: [a]
  - name: workers
    target: ipv4:127.0.0.1:50052
    event_types: [b]
)",
                                    7, "processors[1].name");
  EXPECT_THAT(message, HasSubstr("\"workers\""));
  EXPECT_THAT(message, HasSubstr("processors[0]"));
}

TEST(ConfigTest, DuplicateTopicNames) {
  ExpectError(R"(topics:
  - name: orders
  - name: orders
processors:
  - name: a
    target: t
)",
              3, "topics[1].name");
}

TEST(ConfigTest, TwoProcessorsClaimEverything) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
  - name: b
    target: ipv4:127.0.0.1:50052
    event_types: ["*"]
)",
                                    8, "processors[1].event_types");
  EXPECT_THAT(message, HasSubstr("\"*\""));
  EXPECT_THAT(message, HasSubstr("processor \"a\""));
}

TEST(ConfigTest, EventTypeClaimedTwice) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
    event_types: [order.created, order.paid]
  - name: b
    target: ipv4:127.0.0.1:50052
    event_types:
      - order.paid
)",
                                    9, "processors[1].event_types");
  EXPECT_THAT(message, HasSubstr("\"order.paid\""));
}

TEST(ConfigTest, AutoCommitEnabled) {
  std::string message = ExpectError(
      absl::StrCat(kMinimal,
                   "kafka:\n  group.id: g\n  enable.auto.commit: true\n"),
      8, "kafka.enable.auto.commit");
  EXPECT_THAT(message, HasSubstr("ferry"));
  EXPECT_THAT(message, HasSubstr("false"));
  ExpectError(absl::StrCat(kMinimal, "kafka:\n  enable.auto.offset.store: 1\n"),
              7, "kafka.enable.auto.offset.store");
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

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;

TEST(ConfigFailuresTest, PoliciesAndRetrySettings) {
  absl::StatusOr<Config> config = ParseConfig(R"(topics:
  - name: orders
failures:
  dead_letter_topic: ferry-dlq
  max_event_bytes: 1MiB
processors:
  - name: billing
    target: ipv4:127.0.0.1:1
    event_types: [bill]
    max_attempts: 7
    retry_backoff: 50ms
    retry_backoff_max: 2s
    retry_on_timeout: true
    on_failure: block
  - name: default
    target: ipv4:127.0.0.1:2
    dead_letter_topic: default-dlq
)",
                                              "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->on_failure, FailurePolicy::kDeadLetter);  // a topic is set
  EXPECT_EQ(config->max_event_bytes, 1 << 20);
  const ProcessorConfig& billing = config->processors[0];
  EXPECT_EQ(billing.max_attempts, 7);
  EXPECT_EQ(billing.retry_backoff, absl::Milliseconds(50));
  EXPECT_EQ(billing.retry_backoff_max, absl::Seconds(2));
  EXPECT_TRUE(billing.retry_on_timeout);
  EXPECT_EQ(config->PolicyFor(0), FailurePolicy::kBlock);
  EXPECT_EQ(config->PolicyFor(1), FailurePolicy::kDeadLetter);
  EXPECT_EQ(config->DeadLetterTopicFor(1), "default-dlq");
  EXPECT_EQ(config->DeadLetterTopicFor(-1), "ferry-dlq");
}

TEST(ConfigFailuresTest, DefaultIsSkipWithoutADeadLetterTopic) {
  absl::StatusOr<Config> config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->PolicyFor(-1), FailurePolicy::kSkip);
  EXPECT_EQ(config->processors[0].max_attempts, 5);
  EXPECT_FALSE(config->processors[0].retry_on_timeout);
}

TEST(ConfigFailuresTest, Errors) {
  std::string message =
      ExpectError(absl::StrCat(kMinimal, "failures:\n  on_failure: dlq\n"), 7,
                  "failures.dead_letter_topic");
  EXPECT_THAT(message, HasSubstr("no dead_letter_topic"));
  message = ExpectError(absl::StrCat(kMinimal, "failures:\n  on_failure: drop\n"), 7,
                        "failures.on_failure");
  EXPECT_THAT(message, HasSubstr("use dlq, skip or block"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    on_failure: dlq
)",
                        1, "processors[0].dead_letter_topic");
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    retry_on_timeout: maybe
)",
                        6, "processors[0].retry_on_timeout");
  EXPECT_THAT(message, HasSubstr("true or false"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    retry_backoff: 2s
    retry_backoff_max: 1s
)",
                        1, "processors[0].retry_backoff_max");
}

}  // namespace

TEST(ConfigTest, ControlAndTlsSections) {
  absl::StatusOr<Config> config = ParseConfig(absl::StrCat(R"(kafka:
  group.id: payments
  security.protocol: SASL_SSL
  sasl.mechanism: SCRAM-SHA-512
  sasl.username: ferry
topics:
  - name: orders
processors:
  - name: default
    target: dns:///workers:50051
    tls:
      ca_file: /etc/ferry/workers/ca.crt
      cert_file: /etc/ferry/workers/tls.crt
      key_file: /etc/ferry/workers/tls.key
      server_name: workers.example
server:
  health_listen: 0.0.0.0:7071
  tls:
    cert_file: /etc/ferry/tls/tls.crt
    key_file: /etc/ferry/tls/tls.key
    client_ca_file: /etc/ferry/tls/ca.crt
control:
  token_file: /etc/ferry/token/token
  catch_up_timeout: 3s
)"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  // Kafka security settings pass through unchanged.
  EXPECT_EQ(config->kafka.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(config->kafka.at("sasl.mechanism"), "SCRAM-SHA-512");
  EXPECT_TRUE(config->server_tls.enabled);
  EXPECT_EQ(config->health_listen_address, "0.0.0.0:7071");
  EXPECT_EQ(config->server_tls.cert_file, "/etc/ferry/tls/tls.crt");
  EXPECT_EQ(config->server_tls.ca_file, "/etc/ferry/tls/ca.crt");
  const TlsFiles& worker_tls = config->processors[0].tls;
  EXPECT_TRUE(worker_tls.enabled);
  EXPECT_EQ(worker_tls.ca_file, "/etc/ferry/workers/ca.crt");
  EXPECT_EQ(worker_tls.server_name, "workers.example");
  EXPECT_EQ(config->control_token_file, "/etc/ferry/token/token");
  EXPECT_EQ(config->control_catch_up_timeout, absl::Seconds(3));
  // The control topic defaults from the group id.
  EXPECT_EQ(config->control_topic, "ferry.control.payments");
}

TEST(ConfigTest, ControlTopicDefaultIsAValidTopicName) {
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat("kafka:\n  group.id: team/payments v2\n", kMinimal), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->control_topic, "ferry.control.team_payments_v2");
  config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->control_topic, "ferry.control.ferry");
  EXPECT_FALSE(config->server_tls.enabled);
  EXPECT_TRUE(config->health_listen_address.empty());
  EXPECT_TRUE(config->control_token_file.empty());
}

TEST(ConfigTest, ControlAndTlsErrors) {
  std::string message =
      ExpectError(absl::StrCat(kMinimal, "control:\n  topic: bad topic!\n"), 7, "control.topic");
  EXPECT_THAT(message, HasSubstr("not a valid Kafka topic name"));
  message = ExpectError(absl::StrCat(kMinimal, "control:\n  topic: orders\n"), 1, "control.topic");
  EXPECT_THAT(message, HasSubstr("also listed under topics"));
  message = ExpectError(absl::StrCat(kMinimal, "control:\n  token: abc\n"), 7, "control.token");
  EXPECT_THAT(message, HasSubstr("known keys: token_file, topic, catch_up_timeout"));
  message = ExpectError(absl::StrCat(kMinimal, "server:\n  tls:\n    key_file: /k\n"), 8,
                        "server.tls");
  EXPECT_THAT(message, HasSubstr("cert_file and key_file go together"));
  message = ExpectError(absl::StrCat(kMinimal, "server:\n  tls:\n    client_ca_file: /ca\n"), 8,
                        "server.tls.cert_file");
  EXPECT_THAT(message, HasSubstr("remove `tls:` to serve plaintext"));
  // A processor's tls takes ca_file, not client_ca_file.
  ExpectError(R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    tls:
      client_ca_file: /ca
)",
              7, "processors[0].tls.client_ca_file");
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

}  // namespace ferry

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;

TEST(ConfigSchedulingTest, DelaysPrioritiesAndTheDelayBudget) {
  absl::StatusOr<Config> config = ParseConfig(R"(topics:
  - name: orders
    priority: high
    delay: 30s
    delays:
      order.reminder: 1h
      order.cancelled: 0s
  - name: audit
priorities:
  classes:
    high: 6
    medium: 3
    low: 1
  default: low
  event_types:
    payment.refund: medium
budgets:
  max_delayed_events: 2500
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                              "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const TopicConfig& orders = config->topics[0];
  EXPECT_EQ(orders.priority, "high");
  EXPECT_EQ(orders.delay, absl::Seconds(30));
  EXPECT_THAT(orders.delays, UnorderedElementsAre(Pair("order.reminder", absl::Hours(1)),
                                                  Pair("order.cancelled", absl::ZeroDuration())));
  EXPECT_EQ(config->topics[1].priority, "");
  EXPECT_EQ(config->topics[1].delay, absl::ZeroDuration());
  ASSERT_EQ(config->priority_classes.size(), 3u);
  EXPECT_EQ(config->priority_classes[0].name, "high");  // listed order kept
  EXPECT_EQ(config->priority_classes[0].weight, 6);
  EXPECT_EQ(config->priority_classes[1].name, "medium");
  EXPECT_EQ(config->priority_classes[2].name, "low");
  EXPECT_EQ(config->priority_classes[2].weight, 1);
  EXPECT_EQ(config->default_priority, "low");
  EXPECT_THAT(config->priority_by_type, ElementsAre(Pair("payment.refund", "medium")));
  EXPECT_EQ(config->max_delayed_events, 2500);
}

TEST(ConfigSchedulingTest, Defaults) {
  absl::StatusOr<Config> config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->priority_classes.empty());
  EXPECT_EQ(config->topics[0].delay, absl::ZeroDuration());
  EXPECT_TRUE(config->topics[0].delays.empty());
  EXPECT_EQ(config->topics[0].priority, "");
  EXPECT_EQ(config->max_delayed_events, config->max_buffered_events);
  // The delay budget follows budgets.max_buffered_events unless set.
  config = ParseConfig(absl::StrCat(kMinimal, "budgets:\n  max_buffered_events: 777\n"),
                       "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_delayed_events, 777);
  // Every topic named: no default class needed.
  config = ParseConfig(R"(topics:
  - name: orders
    priority: only
priorities:
  classes: {only: 1}
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                       "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST(ConfigSchedulingTest, DelayErrors) {
  auto topic = [](const std::string& lines) {
    return absl::StrCat("topics:\n  - name: orders\n", lines,
                        "processors:\n  - name: default\n    target: ipv4:127.0.0.1:1\n");
  };
  std::string message = ExpectError(topic("    delay: 3 sec\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("invalid duration"));
  message = ExpectError(topic("    delay: 30\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("has no unit"));
  message = ExpectError(topic("    delay: -5s\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("must not be negative"));
  message = ExpectError(topic("    delays: 5s\n"), 3, "topics[0].delays");
  EXPECT_THAT(message, HasSubstr("map of event type to delay"));
  message = ExpectError(topic("    delays:\n"), 3, "topics[0].delays");
  message = ExpectError(topic("    delays:\n      a: 1h\n      b: soon\n"), 5,
                        "topics[0].delays.b");
  EXPECT_THAT(message, HasSubstr("invalid duration"));
  message = ExpectError(topic("    delays:\n      a: 1h\n      a: 2h\n"), 5,
                        "topics[0].delays.a");
  EXPECT_THAT(message, HasSubstr("set twice"));
  message = ExpectError(absl::StrCat(kMinimal, "budgets:\n  max_delayed_events: 0\n"), 7,
                        "budgets.max_delayed_events");
  EXPECT_THAT(message, HasSubstr("at least 1"));
}

TEST(ConfigSchedulingTest, PriorityErrors) {
  const std::string processors =
      "processors:\n  - name: default\n    target: ipv4:127.0.0.1:1\n";
  // A topic names a class, but there are no priorities.
  std::string message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    priority: high\n", processors), 3,
      "topics[0].priority");
  EXPECT_THAT(message, HasSubstr("no priorities are configured"));
  // A class that does not exist.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n    priority: urgent\n",
                                     "priorities:\n  classes: {high: 6, low: 1}\n",
                                     "  default: low\n", processors),
                        3, "topics[0].priority");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"urgent\" (classes: high, low)"));
  // No default and a topic without a class.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n    priority: high\n",
                                     "  - name: audit\n",
                                     "priorities:\n  classes: {high: 6, low: 1}\n", processors),
                        4, "topics[1].priority");
  EXPECT_THAT(message, HasSubstr("set priorities.default"));
  const std::string topics = "topics:\n  - name: orders\n";
  message = ExpectError(absl::StrCat(topics, "priorities:\n  default: low\n", processors), 4,
                        "priorities.classes");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(absl::StrCat(topics, "priorities:\n  classes:\n", processors), 4,
                        "priorities.classes");
  EXPECT_THAT(message, HasSubstr("map of class name to weight"));
  message = ExpectError(absl::StrCat(topics, "priorities:\n  classes: [high, low]\n", processors),
                        4, "priorities.classes");
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 0\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("at least 1"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 2.5\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("whole number"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 5000\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("at most 1000"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes: {high: 6}\n  default: normal\n", processors),
      5, "priorities.default");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"normal\""));
  message = ExpectError(absl::StrCat(topics,
                                     "priorities:\n  classes: {high: 6}\n  default: high\n",
                                     "  event_types:\n    refund: hihg\n", processors),
                        7, "priorities.event_types.refund");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"hihg\""));
  message = ExpectError(absl::StrCat(topics,
                                     "priorities:\n  classes: {high: 6}\n  default: high\n",
                                     "  event_types: [refund]\n", processors),
                        6, "priorities.event_types");
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes: {high: 6}\n  weights: {}\n", processors), 5,
      "priorities.weights");
  EXPECT_THAT(message, HasSubstr("unknown key (known keys: classes, default, event_types)"));
}

TEST(ConfigSchedulingTest, EventTypesKnownAtStartupMustHaveAProcessor) {
  const std::string processors =
      "processors:\n  - name: billing\n    target: ipv4:127.0.0.1:1\n"
      "    event_types: [order]\n";
  // type: const:X with no processor for X.
  std::string message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    type: const:refund\n", processors), 3,
      "topics[0].type");
  EXPECT_THAT(message, HasSubstr("event type \"refund\", which no processor handles"));
  // The default type is the topic name.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n", processors), 2,
                        "topics[0].type");
  EXPECT_THAT(message, HasSubstr("every record of topic \"orders\" has event type \"orders\""));
  message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    key: record_key\n    type: topic\n", processors),
      4, "topics[0].type");
  // Handled by name, by "*", or not known until run time: fine.
  for (const std::string& good :
       {absl::StrCat("topics:\n  - name: x\n    type: const:order\n", processors),
        absl::StrCat("topics:\n  - name: order\n", processors),
        absl::StrCat("topics:\n  - name: x\n    type: header:type\n", processors),
        absl::StrCat("topics:\n  - name: x\n    type: json:/type\n", processors),
        std::string("topics:\n  - name: x\n    type: const:anything\n"
                    "processors:\n  - name: a\n    target: ipv4:127.0.0.1:1\n"
                    "    event_types: [order]\n  - name: b\n    target: ipv4:127.0.0.1:2\n")}) {
    absl::StatusOr<Config> config = ParseConfig(good, "ferry.yaml");
    EXPECT_TRUE(config.ok()) << config.status() << "\n" << good;
  }
}

}  // namespace
}  // namespace ferry
