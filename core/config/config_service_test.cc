// `kafka:`, `server:`, `log:`, `control:`, TLS and `failures:`.
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
using ::testing::HasSubstr;

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
}  // namespace ferry
