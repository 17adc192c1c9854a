// ParseConfig's typed values: sizes, durations, integers and values of the
// wrong type, wherever they appear.
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

}  // namespace
}  // namespace ferry
