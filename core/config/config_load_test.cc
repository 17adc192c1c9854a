// LoadConfigFile's checks beyond the YAML text (core/config/config_load.cc): kafka
// properties through librdkafka, the files settings name, the size cap, and
// config.locations / LocateConfigError. (config_test.cc covers ParseConfig.)
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;
using ::ferry::testing::TestTmpDir;
using ::ferry::testing::WriteTempFile;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// Loads `yaml` from a file named `name`; returns the error (empty if OK).
std::string LoadError(const std::string& name, const std::string& yaml) {
  const std::string path = WriteTempFile(name, yaml);
  absl::StatusOr<Config> config = LoadConfigFile(path);
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

std::string PathOf(const std::string& name) { return absl::StrCat(TestTmpDir(), "/", name); }

TEST(ConfigLoadTest, KafkaPropertiesAreCheckedByLibrdkafkaWithTheirLine) {
  const std::string head = "kafka:\n  group.id: g\n";
  EXPECT_THAT(LoadError("banana.yaml", head + "  session.timeout.ms: banana\n" + kMinimal),
              StartsWith(absl::StrCat(PathOf("banana.yaml"),
                                      ":3: kafka.session.timeout.ms: librdkafka rejects "
                                      "\"banana\": ")));
  EXPECT_THAT(LoadError("sideways.yaml", head + "  auto.offset.reset: sideways\n" + kMinimal),
              StartsWith(absl::StrCat(PathOf("sideways.yaml"),
                                      ":3: kafka.auto.offset.reset: librdkafka rejects "
                                      "\"sideways\": ")));
  EXPECT_THAT(LoadError("bogus.yaml", head + "  bogus.property: 1\n" + kMinimal),
              StartsWith(absl::StrCat(PathOf("bogus.yaml"),
                                      ":3: kafka.bogus.property: not a librdkafka property")));
  EXPECT_EQ(LoadError("good_kafka.yaml",
                      head + "  session.timeout.ms: 6000\n  auto.offset.reset: latest\n" +
                          kMinimal),
            "");
}

// KIP-848's consumer protocol leaves the session timeout, heartbeat and
// assignor to the broker; librdkafka would refuse them only at start.
TEST(ConfigLoadTest, ClassicOnlyPropertiesWithTheConsumerGroupProtocolAreNamedWithTheirLine) {
  const std::string head = "kafka:\n  group.id: g\n  group.protocol: consumer\n";
  EXPECT_THAT(LoadError("kip848.yaml", head + "  session.timeout.ms: 6000\n" + kMinimal),
              StartsWith(absl::StrCat(PathOf("kip848.yaml"),
                                      ":4: kafka.session.timeout.ms: not allowed with "
                                      "kafka.group.protocol: consumer (",
                                      PathOf("kip848.yaml"), ":3)")));
  EXPECT_EQ(LoadError("kip848_ok.yaml", head + "  group.remote.assignor: uniform\n" + kMinimal),
            "");
  EXPECT_EQ(LoadError("classic.yaml",
                      "kafka:\n  group.protocol: classic\n  session.timeout.ms: 6000\n" +
                          std::string(kMinimal)),
            "");
}

TEST(ConfigLoadTest, ReadmeStyleFilesThatDoNotExistAreNamedWithTheirLine) {
  // The shape of README's example: control.token_file and TLS files under
  // /etc/ferry that do not exist here.
  const std::string yaml = absl::StrCat(kMinimal,
                                        "server:\n"                                  // 6
                                        "  listen: 0.0.0.0:7070\n"                   // 7
                                        "control:\n"                                 // 8
                                        "  token_file: /nonexistent/token/token\n"); // 9
  EXPECT_EQ(LoadError("token.yaml", yaml),
            absl::StrCat(PathOf("token.yaml"),
                         ":9: control.token_file: cannot read /nonexistent/token/token: "
                         "No such file or directory"));

  const std::string cert = WriteTempFile("tls.crt", "-----BEGIN CERTIFICATE-----\n");
  const std::string tls = absl::StrCat(kMinimal,
                                       "server:\n"                                    // 6
                                       "  tls:\n"                                     // 7
                                       "    cert_file: ", cert, "\n"                  // 8
                                       "    key_file: /nonexistent/tls/tls.key\n");   // 9
  EXPECT_EQ(LoadError("server_tls.yaml", tls),
            absl::StrCat(PathOf("server_tls.yaml"),
                         ":9: server.tls.key_file: cannot read /nonexistent/tls/tls.key: "
                         "No such file or directory"));

  const std::string processor_tls =
      "topics:\n  - name: orders\nprocessors:\n"
      "  - name: a\n    target: ipv4:127.0.0.1:1\n    event_types: [x]\n"
      "  - name: b\n    target: ipv4:127.0.0.1:2\n"
      "    tls:\n"                                       // 9
      "      server_name: workers\n"                     // 10
      "      ca_file: /nonexistent/workers/ca.crt\n";    // 11
  EXPECT_EQ(LoadError("processor_tls.yaml", processor_tls),
            absl::StrCat(PathOf("processor_tls.yaml"),
                         ":11: processors[1].tls.ca_file: cannot read "
                         "/nonexistent/workers/ca.crt: No such file or directory"));

  const std::string empty_token = WriteTempFile("empty-token", "\n");
  EXPECT_EQ(LoadError("empty_token.yaml",
                      absl::StrCat(kMinimal, "control:\n  token_file: ", empty_token, "\n")),
            absl::StrCat(PathOf("empty_token.yaml"), ":7: control.token_file: ", empty_token,
                         " is empty"));
}

TEST(ConfigLoadTest, ReadableFilesPass) {
  const std::string token = WriteTempFile("token", "t0ken\n");
  const std::string pem = WriteTempFile("any.pem", "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(LoadError("files_ok.yaml",
                      absl::StrCat(kMinimal, "control:\n  token_file: ", token,
                                   "\nserver:\n  tls:\n    cert_file: ", pem,
                                   "\n    key_file: ", pem, "\n    client_ca_file: ", pem, "\n")),
            "");
}

TEST(ConfigLoadTest, OversizedFileIsRefusedBeforeParsingAtTheLineOfTheLimit) {
  // 5 MiB of 16-byte topic lines: the pathological config that took 586 MB.
  std::string yaml = "topics:\n";
  while (yaml.size() < (5 << 20)) yaml += "  - name: topic\n";
  yaml += "processors: []\n";
  const std::string path = WriteTempFile("huge.yaml", yaml);
  absl::StatusOr<Config> config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  // Line 1 is 8 bytes, the rest 16: byte 1 MiB is on line 1 + (1 MiB - 8) / 16 + 1.
  const int line = 1 + ((1 << 20) - 8) / 16 + 1;
  EXPECT_EQ(std::string(config.status().message()),
            absl::StrCat(path, ":", line,
                         ": the configuration is over the limit of 1048576 bytes (1 MiB) here; "
                         "a ferry config is a few kilobytes"));
  // The same from ParseConfig (the fuzzer's entry point).
  EXPECT_THAT(std::string(ParseConfig(yaml, "in.yaml").status().message()),
              StartsWith(absl::StrCat("in.yaml:", line, ": the configuration is over")));
}

TEST(ConfigLoadTest, TooManyTopicsOrProcessorsAreRefused) {
  std::string topics = "topics:\n";
  for (size_t i = 0; i <= kMaxTopics; ++i) absl::StrAppend(&topics, "  - name: t", i, "\n");
  absl::StatusOr<Config> config =
      ParseConfig(topics + "processors:\n  - name: d\n    target: ipv4:127.0.0.1:1\n", "f.yaml");
  EXPECT_EQ(std::string(config.status().message()),
            absl::StrCat("f.yaml:2: topics: ", kMaxTopics + 1, " topics; at most ", kMaxTopics,
                         " are supported"));
  std::string processors = "topics:\n  - name: t\nprocessors:\n";
  for (size_t i = 0; i <= kMaxProcessors; ++i) {
    absl::StrAppend(&processors, "  - {name: p", i, ", target: ipv4:127.0.0.1:1}\n");
  }
  config = ParseConfig(processors, "f.yaml");
  EXPECT_EQ(std::string(config.status().message()),
            absl::StrCat("f.yaml:4: processors: ", kMaxProcessors + 1, " processors; at most ",
                         kMaxProcessors, " are supported"));
}

TEST(ConfigLoadTest, TooManyYamlValuesAreRefusedBeforeTheTreeIsBuilt) {
  // Under 1 MiB, but ~500k values: yaml-cpp's tree of it took 240 MB.
  std::string yaml = "processors:\n  - name: d\n    target: ipv4:127.0.0.1:1\ntopics:\n  [";
  for (size_t i = 0; i < kMaxConfigValues; ++i) yaml += "a,\n";
  yaml += "a]\n";
  ASSERT_LT(yaml.size(), static_cast<size_t>(kMaxConfigFileBytes));
  // 4 values before the list (map, 3 scalars and the key `processors`...):
  // the limit is crossed inside the list, on a line of its own.
  const std::string message(ParseConfig(yaml, "f.yaml").status().message());
  EXPECT_THAT(message, ::testing::MatchesRegex(absl::StrCat(
                           "f\\.yaml:[0-9]+: more than ", kMaxConfigValues,
                           " YAML values; a ferry config has hundreds")));
  int line = 0;
  ASSERT_TRUE(absl::SimpleAtoi(message.substr(7, message.find(':', 7) - 7), &line)) << message;
  EXPECT_GT(line, 5);
  EXPECT_LT(line, 5 + static_cast<int>(kMaxConfigValues));
  // A big but sane config (1,000 topics with settings) is well under it.
  std::string many = "processors:\n  - name: d\n    target: ipv4:127.0.0.1:1\ntopics:\n";
  for (size_t i = 0; i < kMaxTopics; ++i) {
    absl::StrAppend(&many, "  - {name: t", i, ", ordering: key, key: header:k, delay: 1s}\n");
  }
  EXPECT_TRUE(ParseConfig(many, "f.yaml").ok());
}

TEST(ConfigLoadTest, LocationsAndLocateConfigError) {
  absl::StatusOr<Config> config = ParseConfig(
      absl::StrCat("kafka:\n  group.id: g\n", kMinimal,
                   "server:\n  tls:\n    cert_file: /c\n    key_file: /k\n"
                   "control:\n  token_file: /t\n"),
      "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->locations,
              UnorderedElementsAre(Pair("kafka.group.id", "ferry.yaml:2"),
                                   Pair("server.tls.cert_file", "ferry.yaml:10"),
                                   Pair("server.tls.key_file", "ferry.yaml:11"),
                                   Pair("control.token_file", "ferry.yaml:13")));
  // A startup reader's error (server/workers/tls_credentials.cc) gets the location.
  EXPECT_EQ(LocateConfigError(*config, absl::InvalidArgumentError(
                                           "server.tls.cert_file: /c holds no PEM certificate"))
                .message(),
            "ferry.yaml:10: server.tls.cert_file: /c holds no PEM certificate");
  // Anything else is left alone.
  const absl::Status other = absl::InvalidArgumentError("cannot create Kafka consumer: x");
  EXPECT_EQ(LocateConfigError(*config, other), other);
  EXPECT_EQ(LocateConfigError(*config, absl::OkStatus()), absl::OkStatus());
}

TEST(ConfigLoadTest, CheckConfigReferencesWithoutLocationsStillNamesTheSetting) {
  Config config;
  config.kafka["auto.offset.reset"] = "sideways";
  EXPECT_THAT(std::string(CheckConfigReferences(config).message()),
              StartsWith("kafka.auto.offset.reset: librdkafka rejects"));
  config.kafka.clear();
  config.control_token_file = "/nonexistent/t";
  EXPECT_THAT(std::string(CheckConfigReferences(config).message()),
              HasSubstr("control.token_file: cannot read /nonexistent/t"));
}

}  // namespace
}  // namespace ferry
