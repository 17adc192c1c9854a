// Log line formats: text for people, JSON (one object per line) for log
// pipelines.
#include "core/common/log.h"

#include <nlohmann/json.hpp>

#include <string>

#include "gtest/gtest.h"

namespace ferry {
namespace {

const absl::Time kTime = absl::FromUnixMillis(1700000000123);

TEST(LogTest, TextLine) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarn, "engine", "lag=5 x"),
            "2023-11-14T22:13:20.123Z WARN engine: lag=5 x");
}

TEST(LogTest, JsonLineIsOneValidObject) {
  const std::string message = "quote \" backslash \\ newline \n tab \t bell \x07 done";
  const std::string line =
      FormatLogLine(LogFormat::kJson, kTime, LogLevel::kError, "consumer", message);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed.at("time"), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(parsed.at("level"), "error");
  EXPECT_EQ(parsed.at("component"), "consumer");
  EXPECT_EQ(parsed.at("msg"), message);
}

TEST(LogRateLimiterTest, AllowsABurstPerWindowAndCountsTheRest) {
  LogRateLimiter limiter(2, absl::Seconds(10));
  const absl::Time start = absl::FromUnixSeconds(1000);
  int64_t suppressed = -1;
  EXPECT_TRUE(limiter.Allow(start, &suppressed));
  EXPECT_EQ(suppressed, 0);
  EXPECT_TRUE(limiter.Allow(start + absl::Seconds(1), &suppressed));
  EXPECT_FALSE(limiter.Allow(start + absl::Seconds(2), &suppressed));
  EXPECT_FALSE(limiter.Allow(start + absl::Seconds(3), &suppressed));
  EXPECT_TRUE(limiter.Allow(start + absl::Seconds(11), &suppressed));
  EXPECT_EQ(suppressed, 2);
}

}  // namespace
}  // namespace ferry
