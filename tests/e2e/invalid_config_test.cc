// A bad config stops ferry before it touches Kafka: non-zero exit, a message
// naming the bad key (and its line), and nothing consumed or committed.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class InvalidConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<MockCluster> cluster = StartMockCluster("events", 2);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = new MockCluster(*std::move(cluster));
    ASSERT_TRUE(Produce(cluster_->bootstrap, "events", 10, 2, 2).ok());
  }
  static void TearDownTestSuite() { delete cluster_; }

  // Runs ferry on `yaml` (which may use $BOOTSTRAP); returns exit code and log.
  std::pair<int, std::string> RunFerry(const std::string& name, std::string yaml) {
    const std::string placeholder = "$BOOTSTRAP";
    for (size_t at = yaml.find(placeholder); at != std::string::npos;
         at = yaml.find(placeholder)) {
      yaml.replace(at, placeholder.size(), cluster_->bootstrap);
    }
    Subprocess ferry = StartFerry(yaml, name).value();
    absl::StatusOr<int> exit = ferry.Wait(absl::Seconds(30));
    EXPECT_TRUE(exit.ok()) << "ferry kept running on a bad config:\n" << ferry.Log();
    return {exit.value_or(-1), ferry.Log()};
  }

  void ExpectNothingCommitted(const std::string& group) {
    absl::StatusOr<test_tools::OffsetMap> committed =
        test_tools::ReadCommittedOffsets(cluster_->bootstrap, "events", group);
    ASSERT_TRUE(committed.ok()) << committed.status();
    for (const auto& [partition, offset] : *committed) {
      EXPECT_EQ(offset, test_tools::kNoCommittedOffset) << "partition " << partition;
    }
  }

  static MockCluster* cluster_;
};

MockCluster* InvalidConfigTest::cluster_ = nullptr;

TEST_F(InvalidConfigTest, UnknownKeyIsNamedWithItsLine) {
  const auto [exit_code, log] = RunFerry("unknown_key",
                                         "kafka:\n"
                                         "  bootstrap.servers: $BOOTSTRAP\n"
                                         "  group.id: bad-1\n"
                                         "topics:\n"
                                         "  - name: events\n"
                                         "processors:\n"
                                         "  - name: default\n"
                                         "    target: ipv4:127.0.0.1:1\n"
                                         "lanes:\n"
                                         "  cuont: 8\n");
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, HasSubstr("unknown_key.yaml:10: lanes.cuont: unknown key"));
  ExpectNothingCommitted("bad-1");
}

TEST_F(InvalidConfigTest, BadValueIsNamed) {
  const auto [exit_code, log] = RunFerry("bad_value",
                                         "kafka:\n"
                                         "  bootstrap.servers: $BOOTSTRAP\n"
                                         "  group.id: bad-2\n"
                                         "topics:\n"
                                         "  - name: events\n"
                                         "processors:\n"
                                         "  - name: default\n"
                                         "    target: ipv4:127.0.0.1:1\n"
                                         "    timeout: 3 sec\n");
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, HasSubstr("bad_value.yaml:9: processors[0].timeout"));
  ExpectNothingCommitted("bad-2");
}

TEST_F(InvalidConfigTest, PropertyLibrdkafkaRejectsIsNamed) {
  const auto [exit_code, log] = RunFerry("bad_kafka_property",
                                         "kafka:\n"
                                         "  bootstrap.servers: $BOOTSTRAP\n"
                                         "  group.id: bad-3\n"
                                         "  fetch.wait.max.msx: 10\n"
                                         "topics:\n"
                                         "  - name: events\n"
                                         "processors:\n"
                                         "  - name: default\n"
                                         "    target: ipv4:127.0.0.1:1\n");
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, HasSubstr("kafka.fetch.wait.max.msx"));
  ExpectNothingCommitted("bad-3");
}

// `ferry --check_config` on FILE: exit code and output.
std::pair<int, std::string> CheckConfig(const std::string& name, const std::string& yaml) {
  const std::string path = TempPath(name + ".yaml");
  WriteFile(path, yaml);
  Subprocess ferry = Subprocess::Start({"server/ferry", "--check_config", "--config=" + path},
                                       TempPath(name + ".log"))
                         .value();
  absl::StatusOr<int> exit = ferry.Wait(absl::Seconds(30));
  EXPECT_TRUE(exit.ok()) << "ferry --check_config did not finish:\n" << ferry.Log();
  return {exit.value_or(-1), ferry.Log()};
}

TEST_F(InvalidConfigTest, CheckConfigRejectsKafkaPropertiesLibrdkafkaRejectsWithTheirLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"session.timeout.ms: banana", "kafka.session.timeout.ms: librdkafka rejects \"banana\""},
      {"auto.offset.reset: sideways", "kafka.auto.offset.reset: librdkafka rejects \"sideways\""},
      {"bogus.property: 1", "kafka.bogus.property: not a librdkafka property"},
  };
  int n = 0;
  for (const auto& [line, error] : cases) {
    const std::string name = absl::StrCat("check_kafka_", n++);
    const auto [exit_code, log] = CheckConfig(name,
                                              "kafka:\n"
                                              "  bootstrap.servers: 127.0.0.1:1\n"
                                              "  " + line + "\n"
                                              "topics:\n"
                                              "  - name: events\n"
                                              "processors:\n"
                                              "  - name: default\n"
                                              "    target: ipv4:127.0.0.1:1\n");
    EXPECT_EQ(exit_code, 2) << line;
    EXPECT_THAT(log, HasSubstr(absl::StrCat(TempPath(name + ".yaml"), ":3: ", error))) << line;
    EXPECT_THAT(log, Not(HasSubstr("config OK"))) << line;
  }
}

TEST_F(InvalidConfigTest, CheckConfigNamesTheLineOfAMissingTokenFile) {
  const auto [exit_code, log] = CheckConfig("check_token",
                                            "topics:\n"
                                            "  - name: events\n"
                                            "processors:\n"
                                            "  - name: default\n"
                                            "    target: ipv4:127.0.0.1:1\n"
                                            "control:\n"
                                            "  token_file: /nonexistent/ferry/token\n");
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, HasSubstr(absl::StrCat(TempPath("check_token.yaml"),
                                          ":7: control.token_file: cannot read "
                                          "/nonexistent/ferry/token: No such file or directory")));
}

TEST_F(InvalidConfigTest, CheckConfigNamesTheLineOfATlsFileThatIsNotPem) {
  // Readable and not empty, so only the PEM reader at startup finds it wrong.
  const std::string not_pem = TempPath("not-pem.crt");
  WriteFile(not_pem, "this is not a certificate\n");
  const auto [exit_code, log] = CheckConfig("check_pem",
                                            "topics:\n"
                                            "  - name: events\n"
                                            "processors:\n"
                                            "  - name: default\n"
                                            "    target: ipv4:127.0.0.1:1\n"
                                            "server:\n"
                                            "  tls:\n"
                                            "    cert_file: " + not_pem + "\n"
                                            "    key_file: " + not_pem + "\n");
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, HasSubstr(absl::StrCat(TempPath("check_pem.yaml"), ":8: server.tls.cert_file: ",
                                          not_pem, " holds no PEM certificate")));
}

TEST_F(InvalidConfigTest, CheckConfigRefusesAnOversizedFile) {
  // 5 MiB, 300k+ topics: the file that took 586 MB to parse.
  std::string yaml = "processors:\n  - name: default\n    target: ipv4:127.0.0.1:1\ntopics:\n";
  for (int i = 0; yaml.size() < (5 << 20); ++i) absl::StrAppend(&yaml, "  - name: t", i, "\n");
  const auto [exit_code, log] = CheckConfig("check_huge", yaml);
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(log, ContainsRegex(absl::StrCat(TempPath("check_huge.yaml"),
                                              ":[0-9]+: the configuration is over the limit of "
                                              "1048576 bytes \\(1 MiB\\)")));
}

TEST_F(InvalidConfigTest, MissingFileIsNamed) {
  Subprocess ferry = Subprocess::Start({"server/ferry", "--config=/nonexistent/ferry.yaml"},
                                       TempPath("missing.log"))
                         .value();
  EXPECT_EQ(ferry.Wait(absl::Seconds(30)).value(), 2);
  EXPECT_THAT(ferry.Log(), HasSubstr("/nonexistent/ferry.yaml"));
}

}  // namespace
}  // namespace ferry::testing
