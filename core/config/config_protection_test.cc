// processors[i].rate_limit, concurrency and circuit_breaker: their defaults,
// the short and map forms, and every bad value with the line it was written on.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/config/config_test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::ExpectError;
using ::ferry::testing::kMinimal;
using ::testing::HasSubstr;

// kMinimal's processor with `lines` appended under it (line 6 on).
std::string With(const std::string& lines) { return absl::StrCat(kMinimal, lines); }

ProcessorConfig Parsed(const std::string& lines) {
  absl::StatusOr<Config> config = ParseConfig(With(lines), "ferry.yaml");
  EXPECT_TRUE(config.ok()) << config.status() << "\n" << lines;
  if (!config.ok() || config->processors.empty()) return ProcessorConfig{};
  return config->processors[0];
}

// A bad value: the error is at `line` and `path` and says `says`.
struct Bad {
  std::string lines;
  int line;
  std::string path;
  std::string says;
};

void ExpectAll(const std::vector<Bad>& cases) {
  for (const Bad& c : cases) {
    const std::string message = ExpectError(With(c.lines), c.line, c.path);
    EXPECT_THAT(message, HasSubstr(c.says)) << c.lines;
  }
}

TEST(ConfigProtectionTest, DefaultsWhenAbsent) {
  const ProcessorConfig p = Parsed("");
  EXPECT_FALSE(p.rate_limit.limited());
  EXPECT_EQ(p.rate_limit.events_per_second, 0);
  EXPECT_EQ(p.rate_limit.burst, 0);
  EXPECT_EQ(p.concurrency.mode, ConcurrencyMode::kFixed);
  EXPECT_EQ(p.concurrency.initial_limit, 20);
  EXPECT_EQ(p.concurrency.min_limit, 1);
  EXPECT_FALSE(p.circuit_breaker.enabled);
  EXPECT_EQ(p.circuit_breaker.failure_ratio, 0.5);
  EXPECT_EQ(p.circuit_breaker.min_outcomes, 20);
  EXPECT_EQ(p.circuit_breaker.window, absl::Seconds(10));
  EXPECT_EQ(p.circuit_breaker.open_for, absl::Seconds(1));
  EXPECT_EQ(p.circuit_breaker.open_max, absl::Seconds(30));
  EXPECT_EQ(p.circuit_breaker.probes, 3);
  // The embedded default (ferry with no flags) protects nothing either.
  absl::StatusOr<Config> embedded = ParseConfig(EmbeddedDefaultConfigYaml(), "<embedded>");
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_FALSE(embedded->processors[0].rate_limit.limited());
  EXPECT_EQ(embedded->processors[0].concurrency.mode, ConcurrencyMode::kFixed);
  EXPECT_FALSE(embedded->processors[0].circuit_breaker.enabled);
  // The examples it carries as comments parse as they read.
  std::string uncommented = EmbeddedDefaultConfigYaml();
  for (const char* key : {"rate_limit", "concurrency", "circuit_breaker"}) {
    const std::string commented = absl::StrCat("    # ", key, ":");
    const size_t at = uncommented.find(commented);
    ASSERT_NE(at, std::string::npos) << key;
    uncommented.replace(at, commented.size(), absl::StrCat("    ", key, ":"));
  }
  embedded = ParseConfig(uncommented, "<embedded>");
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_EQ(embedded->processors[0].rate_limit.events_per_second, 200);
  EXPECT_EQ(embedded->processors[0].concurrency.mode, ConcurrencyMode::kAdaptive);
  EXPECT_TRUE(embedded->processors[0].circuit_breaker.enabled);
}

TEST(ConfigProtectionTest, RateLimitForms) {
  ProcessorConfig p = Parsed("    rate_limit: 200\n");
  EXPECT_EQ(p.rate_limit.events_per_second, 200);
  EXPECT_EQ(p.rate_limit.burst, 0);
  EXPECT_EQ(p.rate_limit.EffectiveBurst(), 20);
  EXPECT_EQ(Parsed("    rate_limit: \"200/s\"\n").rate_limit.events_per_second, 200);
  EXPECT_EQ(Parsed("    rate_limit: 200/s\n").rate_limit.events_per_second, 200);
  EXPECT_EQ(Parsed("    rate_limit: \" 75 / s \"\n").rate_limit.events_per_second, 75);
  p = Parsed("    rate_limit: 0.5\n");
  EXPECT_EQ(p.rate_limit.events_per_second, 0.5);
  EXPECT_EQ(p.rate_limit.EffectiveBurst(), 1);
  EXPECT_EQ(Parsed("    rate_limit: 0.001\n").rate_limit.events_per_second, 0.001);
  EXPECT_EQ(Parsed("    rate_limit: 1e9/s\n").rate_limit.events_per_second, 1e9);
  p = Parsed("    rate_limit: {events_per_second: 200, burst: 20}\n");
  EXPECT_EQ(p.rate_limit.events_per_second, 200);
  EXPECT_EQ(p.rate_limit.burst, 20);
  p = Parsed("    rate_limit:\n      events_per_second: 50/s\n");
  EXPECT_EQ(p.rate_limit.events_per_second, 50);
  EXPECT_EQ(p.rate_limit.burst, 0);
  EXPECT_EQ(p.rate_limit.EffectiveBurst(), 5);
  setenv("FERRY_TEST_RATE", "300", 1);
  EXPECT_EQ(Parsed("    rate_limit: ${FERRY_TEST_RATE}/s\n").rate_limit.events_per_second, 300);
}

TEST(ConfigProtectionTest, RateLimitErrors) {
  const std::string at = "processors[0].rate_limit";
  ExpectAll({
      {"    rate_limit: 0\n", 6, at, "leave rate_limit out"},
      {"    rate_limit: 0/s\n", 6, at, "leave rate_limit out"},
      {"    rate_limit: off\n", 6, at, "leave rate_limit out"},
      {"    rate_limit: false\n", 6, at, "leave rate_limit out"},
      {"    rate_limit: -5\n", 6, at, "greater than 0"},
      {"    rate_limit: -0.0\n", 6, at, "leave rate_limit out"},
      {"    rate_limit: nan\n", 6, at, "finite"},
      {"    rate_limit: inf\n", 6, at, "finite"},
      {"    rate_limit: -inf/s\n", 6, at, "finite"},
      {"    rate_limit: .inf\n", 6, at, "expected events per second"},
      {"    rate_limit: 1e10\n", 6, at, "between 0.001 and 1000000000 events per second"},
      {"    rate_limit: 1000000001\n", 6, at, "between"},
      {"    rate_limit: 1e-300\n", 6, at, "between"},
      {"    rate_limit: fast\n", 6, at, "expected events per second"},
      {"    rate_limit: 200 per second\n", 6, at, "expected events per second"},
      {"    rate_limit: /s\n", 6, at, "expected events per second"},
      {"    rate_limit: 200/m\n", 6, at, "only a rate per second is accepted (\"/s\")"},
      {"    rate_limit: 200/min\n", 6, at, "only a rate per second"},
      {"    rate_limit: 200/S\n", 6, at, "only a rate per second"},
      {"    rate_limit: 200/\n", 6, at, "only a rate per second"},
      {"    rate_limit: 2/s/s\n", 6, at, "only a rate per second"},
      {"    rate_limit:\n", 6, at, "missing value"},
      {"    rate_limit: [200]\n", 6, at, "got a list"},
      {"    rate_limit: {}\n", 6, at + ".events_per_second", "missing"},
      {"    rate_limit: {burst: 20}\n", 6, at + ".events_per_second", "missing"},
      {"    rate_limit: {events_per_second: 200, bust: 2}\n", 6, at + ".bust",
       "unknown key (known keys: events_per_second, burst)"},
      {"    rate_limit: {events_per_second: 0}\n", 6, at + ".events_per_second",
       "leave rate_limit out"},
      {"    rate_limit: {events_per_second: 10/h}\n", 6, at + ".events_per_second",
       "only a rate per second"},
      {"    rate_limit: {events_per_second: 200, burst: 0}\n", 6, at + ".burst",
       "at least 1"},
      {"    rate_limit: {events_per_second: 200, burst: -3}\n", 6, at + ".burst",
       "at least 1"},
      {"    rate_limit: {events_per_second: 200, burst: 2.5}\n", 6, at + ".burst",
       "whole number"},
      {"    rate_limit: {events_per_second: 200, burst: 2000000000}\n", 6, at + ".burst",
       "at most 1000000000"},
      {"    rate_limit: {events_per_second: 200, burst: 99999999999999999999999}\n", 6,
       at + ".burst", "expected"},
      {"    rate_limit: {events_per_second: 200, burst: lots}\n", 6, at + ".burst",
       "expected an integer"},
      {"    rate_limit:\n      events_per_second: 200\n      burst: 0\n", 8, at + ".burst",
       "at least 1"},
      {"    rate_limit:\n      burst: 5\n\n      events_per_second: fast\n", 9,
       at + ".events_per_second", "expected events per second"},
      {"    rate_limit:\n      events_per_second: 1\n      events_per_second: 2\n", 8,
       at + ".events_per_second", "set twice"},
      {"    rate_limit: 10\n    rate_limit: 20\n", 7, at, "set twice"},
  });
}

TEST(ConfigProtectionTest, ConcurrencyForms) {
  EXPECT_EQ(Parsed("    concurrency: fixed\n").concurrency.mode, ConcurrencyMode::kFixed);
  ProcessorConfig p = Parsed("    concurrency: adaptive\n");
  EXPECT_EQ(p.concurrency.mode, ConcurrencyMode::kAdaptive);
  EXPECT_EQ(p.concurrency.initial_limit, 20);
  EXPECT_EQ(p.concurrency.min_limit, 1);
  p = Parsed("    concurrency: {mode: adaptive, initial_limit: 40, min_limit: 4}\n");
  EXPECT_EQ(p.concurrency.mode, ConcurrencyMode::kAdaptive);
  EXPECT_EQ(p.concurrency.initial_limit, 40);
  EXPECT_EQ(p.concurrency.min_limit, 4);
  EXPECT_EQ(Parsed("    concurrency: {mode: fixed}\n").concurrency.mode, ConcurrencyMode::kFixed);
  // min_limit may equal initial_limit, and initial_limit the whole credit
  // (2 streams x 256).
  p = Parsed("    concurrency: {mode: adaptive, initial_limit: 512, min_limit: 512}\n");
  EXPECT_EQ(p.concurrency.initial_limit, 512);
  EXPECT_EQ(p.concurrency.min_limit, 512);
  // The bound uses streams and max_in_flight written after concurrency.
  p = Parsed(
      "    concurrency:\n      mode: adaptive\n      initial_limit: 1000\n"
      "    streams: 4\n");
  EXPECT_EQ(p.concurrency.initial_limit, 1000);
  // The default initial_limit above a small credit is capped by the engine,
  // not refused: the operator did not write it.
  p = Parsed("    streams: 1\n    max_in_flight: 8\n    concurrency: adaptive\n");
  EXPECT_EQ(p.concurrency.mode, ConcurrencyMode::kAdaptive);
}

TEST(ConfigProtectionTest, ConcurrencyErrors) {
  const std::string at = "processors[0].concurrency";
  ExpectAll({
      {"    concurrency: dynamic\n", 6, at,
       "unknown concurrency mode \"dynamic\" (use fixed or adaptive)"},
      {"    concurrency: Adaptive\n", 6, at, "unknown concurrency mode"},
      {"    concurrency:\n", 6, at, "missing value"},
      {"    concurrency: [adaptive]\n", 6, at, "got a list"},
      {"    concurrency: {}\n", 6, at + ".mode", "missing; write `mode: adaptive`"},
      {"    concurrency: {initial_limit: 20}\n", 6, at + ".mode", "missing"},
      {"    concurrency: {mode: fixed, initial_limit: 20}\n", 6, at + ".initial_limit",
       "applies only to `mode: adaptive`"},
      {"    concurrency:\n      mode: fixed\n      min_limit: 2\n", 8, at + ".min_limit",
       "applies only to `mode: adaptive`"},
      {"    concurrency: {mode: sometimes}\n", 6, at + ".mode", "unknown concurrency mode"},
      {"    concurrency: {mode: adaptive, limit: 5}\n", 6, at + ".limit",
       "unknown key (known keys: mode, initial_limit, min_limit)"},
      {"    concurrency: {mode: adaptive, initial_limit: 0}\n", 6, at + ".initial_limit",
       "at least 1"},
      {"    concurrency: {mode: adaptive, min_limit: -1}\n", 6, at + ".min_limit",
       "at least 1"},
      {"    concurrency: {mode: adaptive, min_limit: 1.5}\n", 6, at + ".min_limit",
       "whole number"},
      {"    concurrency: {mode: adaptive, initial_limit: 99999999999}\n", 6,
       at + ".initial_limit", "at most"},
      {"    concurrency: {mode: adaptive, initial_limit: 5, min_limit: 10}\n", 6,
       at + ".min_limit", "10 is above initial_limit 5;"},
      {"    concurrency:\n      mode: adaptive\n      min_limit: 30\n", 8, at + ".min_limit",
       "above initial_limit 20 (the default)"},
      // Cross-field: above streams x max_in_flight (2 x 256 by default).
      {"    concurrency: {mode: adaptive, initial_limit: 513}\n", 6, at + ".initial_limit",
       "513 is above streams x max_in_flight (2 x 256 = 512), the most processor "
       "\"default\" can have in flight"},
      {"    streams: 1\n    max_in_flight: 4\n    concurrency:\n      mode: adaptive\n"
       "      initial_limit: 4\n      min_limit: 5\n",
       11, at + ".min_limit", "above initial_limit 4"},
      {"    concurrency:\n      mode: adaptive\n      min_limit: 9\n    streams: 1\n"
       "    max_in_flight: 8\n",
       8, at + ".min_limit", "(1 x 8 = 8)"},
      {"    concurrency:\n      initial_limit: 100\n      mode: adaptive\n"
       "    max_in_flight: 16\n",
       7, at + ".initial_limit", "(2 x 16 = 32)"},
  });
  // The second processor's limit is named by its own index and line.
  const std::string two = absl::StrCat(
      kMinimal,
      "    event_types: [a]\n"
      "  - name: bulk\n"
      "    target: ipv4:127.0.0.1:50052\n"
      "    streams: 1\n"
      "    concurrency: {mode: adaptive, initial_limit: 257}\n");
  EXPECT_THAT(ExpectError(two, 10, "processors[1].concurrency.initial_limit"),
              HasSubstr("processor \"bulk\""));
}

TEST(ConfigProtectionTest, CircuitBreakerForms) {
  for (const char* on : {"on", "true", "yes", "True"}) {
    const ProcessorConfig p = Parsed(absl::StrCat("    circuit_breaker: ", on, "\n"));
    EXPECT_TRUE(p.circuit_breaker.enabled) << on;
    EXPECT_EQ(p.circuit_breaker.failure_ratio, 0.5) << on;
    EXPECT_EQ(p.circuit_breaker.probes, 3) << on;
  }
  for (const char* off : {"off", "false", "no"}) {
    EXPECT_FALSE(Parsed(absl::StrCat("    circuit_breaker: ", off, "\n")).circuit_breaker.enabled)
        << off;
  }
  // A map turns it on, with defaults for what it leaves out.
  ProcessorConfig p = Parsed("    circuit_breaker: {}\n");
  EXPECT_TRUE(p.circuit_breaker.enabled);
  EXPECT_EQ(p.circuit_breaker.open_max, absl::Seconds(30));
  p = Parsed(
      "    circuit_breaker:\n"
      "      failure_ratio: 0.8\n"
      "      min_outcomes: 50\n"
      "      window: 30s\n"
      "      open_for: 2s\n"
      "      open_max: 1m\n"
      "      probes: 5\n");
  EXPECT_TRUE(p.circuit_breaker.enabled);
  EXPECT_EQ(p.circuit_breaker.failure_ratio, 0.8);
  EXPECT_EQ(p.circuit_breaker.min_outcomes, 50);
  EXPECT_EQ(p.circuit_breaker.window, absl::Seconds(30));
  EXPECT_EQ(p.circuit_breaker.open_for, absl::Seconds(2));
  EXPECT_EQ(p.circuit_breaker.open_max, absl::Minutes(1));
  EXPECT_EQ(p.circuit_breaker.probes, 5);
  p = Parsed("    circuit_breaker: {enabled: false, failure_ratio: 1}\n");
  EXPECT_FALSE(p.circuit_breaker.enabled);
  EXPECT_EQ(p.circuit_breaker.failure_ratio, 1);
  p = Parsed("    circuit_breaker: {open_for: 5s, open_max: 5s}\n");
  EXPECT_EQ(p.circuit_breaker.open_for, absl::Seconds(5));
  EXPECT_EQ(p.circuit_breaker.open_max, absl::Seconds(5));
}

TEST(ConfigProtectionTest, CircuitBreakerErrors) {
  const std::string at = "processors[0].circuit_breaker";
  ExpectAll({
      {"    circuit_breaker: maybe\n", 6, at, "expected true or false"},
      {"    circuit_breaker: 1\n", 6, at, "expected true or false"},
      {"    circuit_breaker:\n", 6, at, "missing value"},
      {"    circuit_breaker: [on]\n", 6, at, "got a list"},
      {"    circuit_breaker: {threshold: 0.5}\n", 6, at + ".threshold",
       "unknown key (known keys: enabled, failure_ratio, min_outcomes, window, open_for, "
       "open_max, probes)"},
      {"    circuit_breaker: {enabled: sometimes}\n", 6, at + ".enabled",
       "expected true or false"},
      {"    circuit_breaker: {failure_ratio: 0}\n", 6, at + ".failure_ratio",
       "greater than 0 and at most 1"},
      {"    circuit_breaker: {failure_ratio: 1.5}\n", 6, at + ".failure_ratio", "at most 1"},
      {"    circuit_breaker: {failure_ratio: -0.1}\n", 6, at + ".failure_ratio",
       "greater than 0"},
      {"    circuit_breaker: {failure_ratio: nan}\n", 6, at + ".failure_ratio",
       "expected a number"},
      {"    circuit_breaker: {failure_ratio: inf}\n", 6, at + ".failure_ratio",
       "expected a number"},
      {"    circuit_breaker: {failure_ratio: half}\n", 6, at + ".failure_ratio",
       "expected a number"},
      {"    circuit_breaker: {failure_ratio: 50%}\n", 6, at + ".failure_ratio",
       "expected a number"},
      {"    circuit_breaker: {min_outcomes: 0}\n", 6, at + ".min_outcomes", "at least 1"},
      {"    circuit_breaker: {min_outcomes: 2.5}\n", 6, at + ".min_outcomes", "whole number"},
      {"    circuit_breaker: {probes: 0}\n", 6, at + ".probes", "at least 1"},
      {"    circuit_breaker: {probes: -2}\n", 6, at + ".probes", "at least 1"},
      {"    circuit_breaker: {window: 0s}\n", 6, at + ".window", "greater than zero"},
      {"    circuit_breaker: {window: 10}\n", 6, at + ".window", "has no unit"},
      {"    circuit_breaker: {window: -1s}\n", 6, at + ".window", "negative"},
      {"    circuit_breaker: {open_for: 0ms}\n", 6, at + ".open_for", "greater than zero"},
      {"    circuit_breaker: {open_for: forever}\n", 6, at + ".open_for", "invalid duration"},
      {"    circuit_breaker: {open_max: 0s}\n", 6, at + ".open_max", "greater than zero"},
      {"    circuit_breaker: {open_max: inf}\n", 6, at + ".open_max", "\"inf\""},
      {"    circuit_breaker:\n      open_for: 10s\n      open_max: 5s\n", 8, at + ".open_max",
       "open_max (5s) must not be shorter than open_for (10s)"},
      {"    circuit_breaker:\n      window: 5s\n      open_for: 1m\n", 8, at + ".open_for",
       "open_max (30s, the default) must not be shorter than open_for (1m)"},
      {"    circuit_breaker:\n      probes: 2\n      probes: 3\n", 8, at + ".probes",
       "set twice"},
  });
}

TEST(ConfigProtectionTest, ProcessorKnowsTheNewKeys) {
  const std::string message = ExpectError(With("    rate_limits: 5\n"), 6,
                                          "processors[0].rate_limits");
  EXPECT_THAT(message, HasSubstr("rate_limit, concurrency, circuit_breaker"));
}

TEST(ConfigProtectionTest, AllThreeTogetherOnTwoProcessors) {
  absl::StatusOr<Config> config = ParseConfig(
      absl::StrCat(kMinimal,
                   "    event_types: [a]\n"
                   "    rate_limit: {events_per_second: 1000, burst: 100}\n"
                   "    concurrency: adaptive\n"
                   "    circuit_breaker: on\n"
                   "  - name: other\n"
                   "    target: ipv4:127.0.0.1:50052\n"),
      "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ProcessorConfig& first = config->processors[0];
  EXPECT_EQ(first.rate_limit.events_per_second, 1000);
  EXPECT_EQ(first.rate_limit.EffectiveBurst(), 100);
  EXPECT_EQ(first.concurrency.mode, ConcurrencyMode::kAdaptive);
  EXPECT_TRUE(first.circuit_breaker.enabled);
  const ProcessorConfig& second = config->processors[1];
  EXPECT_FALSE(second.rate_limit.limited());
  EXPECT_EQ(second.concurrency.mode, ConcurrencyMode::kFixed);
  EXPECT_FALSE(second.circuit_breaker.enabled);
}

}  // namespace
}  // namespace ferry
