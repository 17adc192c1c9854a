// processors[i].keepalive: defaults, values, and the errors for values gRPC
// workers would refuse (too frequent pings) or that mean nothing.
#include <string>

#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::kMinimal;
using ::testing::HasSubstr;

// kMinimal's processor with `keepalive` lines appended under it (line 6 on).
absl::StatusOr<Config> WithKeepalive(const std::string& lines) {
  return ParseConfig(absl::StrCat(kMinimal, "    keepalive:\n", lines), "ferry.yaml");
}

TEST(ConfigKeepaliveTest, DefaultNoticesAVanishedWorkerWellBeforeTheEventTimeout) {
  absl::StatusOr<Config> config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ProcessorConfig& processor = config->processors[0];
  EXPECT_EQ(processor.keepalive.interval, absl::Seconds(5));
  EXPECT_EQ(processor.keepalive.timeout, absl::Seconds(5));
  EXPECT_EQ(processor.keepalive.Bound(), absl::Seconds(10));
  EXPECT_LT(processor.keepalive.Bound() * 2, processor.timeout);
}

TEST(ConfigKeepaliveTest, IntervalAndTimeout) {
  absl::StatusOr<Config> config = WithKeepalive("      interval: 1s\n      timeout: 1500ms\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->processors[0].keepalive.interval, absl::Seconds(1));
  EXPECT_EQ(config->processors[0].keepalive.timeout, absl::Milliseconds(1500));
  // One of them alone keeps the other's default.
  config = WithKeepalive("      timeout: 2s\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->processors[0].keepalive.interval, absl::Seconds(5));
  EXPECT_EQ(config->processors[0].keepalive.timeout, absl::Seconds(2));
}

TEST(ConfigKeepaliveTest, Errors) {
  struct Case {
    std::string lines;
    std::string path;
    std::string says;
  };
  const Case cases[] = {
      {"      interval: 500ms\n", "processors[0].keepalive.interval", "at least 1s"},
      {"      timeout: 10ms\n", "processors[0].keepalive.timeout", "at least 1s"},
      {"      interval: 0s\n", "processors[0].keepalive.interval", "greater than zero"},
      {"      interval: 5\n", "processors[0].keepalive.interval", "has no unit"},
      {"      interval: -1s\n", "processors[0].keepalive.interval", "negative"},
      {"      interval: forever\n", "processors[0].keepalive.interval", "invalid duration"},
      {"      time: 5s\n", "processors[0].keepalive", "time"},
      {"      - 5s\n", "processors[0].keepalive", ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Config> config = WithKeepalive(c.lines);
    ASSERT_FALSE(config.ok()) << c.lines;
    const std::string message(config.status().message());
    EXPECT_THAT(message, HasSubstr(c.path)) << c.lines;
    EXPECT_THAT(message, HasSubstr(c.says)) << c.lines;
    EXPECT_THAT(message, HasSubstr("ferry.yaml:")) << c.lines;
  }
  // A scalar, not a map.
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat(kMinimal, "    keepalive: 5s\n"), "ferry.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("processors[0].keepalive"));
}

}  // namespace
}  // namespace ferry
