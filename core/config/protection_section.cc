#include "core/config/protection_section.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry {

using config_yaml::Child;
using config_yaml::Describe;
using config_yaml::YamlReader;

namespace {

// Below this a bucket would refill less than once in ~17 minutes: such a
// rate is a typo (or a way to stop the processor), not a limit, and its
// refill interval would overflow the engine's clock arithmetic.
constexpr double kMinEventsPerSecond = 0.001;

constexpr absl::string_view kNoLimit = "to run without a limit, leave rate_limit out";

// A rate: `200`, `0.5`, `"200/s"`. Only "/s" is a unit: a rate per minute
// would be easy to misread by a factor of 60, so it is refused, not converted.
absl::Status ReadEventsPerSecond(const YamlReader& reader, const YAML::Node& node,
                                 const std::string& path, int line, double* out) {
  std::string text;
  absl::Status status = reader.GetScalar(node, path, line, "rate_limit: 200/s", &text);
  if (!status.ok()) return status;
  absl::string_view number = absl::StripAsciiWhitespace(text);
  const std::string lower = absl::AsciiStrToLower(number);
  if (lower == "off" || lower == "false" || lower == "no" || lower == "none") {
    return reader.Error(line, path, absl::StrCat("\"", lower, "\" is not a rate; ", kNoLimit));
  }
  const size_t slash = number.find('/');
  if (slash != absl::string_view::npos) {
    const absl::string_view unit = absl::StripAsciiWhitespace(number.substr(slash + 1));
    if (unit != "s") {
      return reader.Error(line, path,
                          absl::StrCat("only a rate per second is accepted (\"/s\"), got \"",
                                       absl::CEscape(text),
                                       "\"; write events per second, e.g. `200/s`"));
    }
    number = absl::StripAsciiWhitespace(number.substr(0, slash));
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value)) {
    return reader.Error(line, path,
                        absl::StrCat("expected events per second such as `200` or `200/s`, "
                                     "got \"",
                                     absl::CEscape(text), "\""));
  }
  if (!std::isfinite(value)) {
    return reader.Error(line, path,
                        absl::StrCat("must be a finite number of events per second, got \"",
                                     absl::CEscape(text), "\""));
  }
  if (value == 0) {
    return reader.Error(line, path, absl::StrCat("0 events per second would stop the "
                                                 "processor; ",
                                                 kNoLimit));
  }
  if (value < 0) {
    return reader.Error(line, path,
                        absl::StrCat("must be greater than 0 events per second, got ", number));
  }
  if (value < kMinEventsPerSecond || value > kMaxEventsPerSecond) {
    return reader.Error(line, path,
                        absl::StrCat("must be between ", kMinEventsPerSecond, " and ",
                                     static_cast<int64_t>(kMaxEventsPerSecond),
                                     " events per second, got ", number));
  }
  *out = value;
  return absl::OkStatus();
}

// `rate_limit: 200/s` or `rate_limit: {events_per_second: 200, burst: 20}`.
absl::Status ReadRateLimit(const YamlReader& reader, const YAML::Node& value,
                           const std::string& path, int line, RateLimitConfig* out) {
  if (value.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected events per second (`rate_limit: 200/s`) or a "
                                     "map (`rate_limit: {events_per_second: 200, burst: "
                                     "20}`), got ",
                                     Describe(value)));
  }
  if (!value.IsMap()) {
    return ReadEventsPerSecond(reader, value, path, line, &out->events_per_second);
  }
  bool has_rate = false;
  absl::Status status = reader.ForEachField(
      value, path, line, {"events_per_second", "burst"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& node,
          int node_line) -> absl::Status {
        if (key == "burst") {
          return reader.GetInt64(node, child, node_line, 1, kMaxBurst, "burst: 20", &out->burst);
        }
        has_rate = true;
        return ReadEventsPerSecond(reader, node, child, node_line, &out->events_per_second);
      });
  if (!status.ok()) return status;
  if (!has_rate) {
    return reader.Error(line, Child(path, "events_per_second"),
                        "missing; e.g. `rate_limit: {events_per_second: 200, burst: 20}` "
                        "(burst is optional)");
  }
  return absl::OkStatus();
}

absl::Status ReadMode(const YamlReader& reader, const YAML::Node& node,
                      const std::string& path, int line, ConcurrencyMode* out) {
  return reader.GetEnum<ConcurrencyMode>(node, path, line, "concurrency mode",
                                         {{"fixed", ConcurrencyMode::kFixed},
                                          {"adaptive", ConcurrencyMode::kAdaptive}},
                                         out);
}

// After a `concurrency:` map: a mode, limits only with adaptive, and
// min_limit <= initial_limit.
absl::Status CheckConcurrencyMap(const YamlReader& reader, const std::string& path, int line,
                                 bool has_mode, const ConcurrencyConfig& concurrency,
                                 const ConcurrencyLines& lines) {
  if (!has_mode) {
    return reader.Error(line, Child(path, "mode"),
                        "missing; write `mode: adaptive` (initial_limit and min_limit apply "
                        "only to adaptive) or `mode: fixed`");
  }
  if (concurrency.mode == ConcurrencyMode::kFixed &&
      (lines.initial_limit > 0 || lines.min_limit > 0)) {
    const bool initial = lines.initial_limit > 0;
    return reader.Error(initial ? lines.initial_limit : lines.min_limit,
                        Child(path, initial ? "initial_limit" : "min_limit"),
                        "applies only to `mode: adaptive`; with `mode: fixed` the limit is "
                        "streams x max_in_flight (and the workers' credit)");
  }
  if (concurrency.min_limit > concurrency.initial_limit) {
    return reader.Error(
        lines.min_limit > 0 ? lines.min_limit : line, Child(path, "min_limit"),
        absl::StrCat(concurrency.min_limit, " is above initial_limit ",
                     concurrency.initial_limit, lines.initial_limit > 0 ? "" : " (the default)",
                     "; the limit starts at initial_limit and never goes below min_limit"));
  }
  return absl::OkStatus();
}

// `concurrency: adaptive` or `concurrency: {mode: adaptive, initial_limit: 20,
// min_limit: 1}`.
absl::Status ReadConcurrency(const YamlReader& reader, const YAML::Node& value,
                             const std::string& path, int line, ConcurrencyConfig* out,
                             ConcurrencyLines* lines) {
  if (value.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected `fixed`, `adaptive` or a map such as "
                                     "`{mode: adaptive, initial_limit: 20, min_limit: 1}`, "
                                     "got ",
                                     Describe(value)));
  }
  if (!value.IsMap()) return ReadMode(reader, value, path, line, &out->mode);
  bool has_mode = false;
  ConcurrencyLines written;
  absl::Status status = reader.ForEachField(
      value, path, line, {"mode", "initial_limit", "min_limit"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& node,
          int node_line) -> absl::Status {
        if (key == "mode") {
          has_mode = true;
          return ReadMode(reader, node, child, node_line, &out->mode);
        }
        if (key == "initial_limit") {
          written.initial_limit = node_line;
          return reader.GetInt(node, child, node_line, 1, "initial_limit: 20",
                               &out->initial_limit);
        }
        written.min_limit = node_line;
        return reader.GetInt(node, child, node_line, 1, "min_limit: 1", &out->min_limit);
      });
  if (status.ok()) status = CheckConcurrencyMap(reader, path, line, has_mode, *out, written);
  if (!status.ok()) return status;
  *lines = written;
  return absl::OkStatus();
}

// The breaker's whole-number and duration knobs.
struct BreakerInt {
  absl::string_view key;
  absl::string_view example;
  int CircuitBreakerConfig::*field;
};
constexpr BreakerInt kBreakerInts[] = {
    {"min_outcomes", "min_outcomes: 20", &CircuitBreakerConfig::min_outcomes},
    {"probes", "probes: 3", &CircuitBreakerConfig::probes},
};
struct BreakerDuration {
  absl::string_view key;
  absl::string_view example;
  absl::Duration CircuitBreakerConfig::*field;
};
constexpr BreakerDuration kBreakerDurations[] = {
    {"window", "window: 10s", &CircuitBreakerConfig::window},
    {"open_for", "open_for: 1s", &CircuitBreakerConfig::open_for},
    {"open_max", "open_max: 30s", &CircuitBreakerConfig::open_max},
};

// failure_ratio: in (0, 1]; 1 opens only when every outcome failed.
absl::Status ReadFailureRatio(const YamlReader& reader, const YAML::Node& node,
                              const std::string& path, int line, double* out) {
  std::string text;
  absl::Status status = reader.GetScalar(node, path, line, "failure_ratio: 0.5", &text);
  if (!status.ok()) return status;
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return reader.Error(line, path,
                        absl::StrCat("expected a number greater than 0 and at most 1 such "
                                     "as 0.5, got ",
                                     Describe(node)));
  }
  if (!(value > 0 && value <= 1)) {
    return reader.Error(line, path,
                        absl::StrCat("must be greater than 0 and at most 1 (the share of "
                                     "failed outcomes that opens the breaker, e.g. 0.5), "
                                     "got ",
                                     text));
  }
  *out = value;
  return absl::OkStatus();
}

// One knob of a `circuit_breaker:` map; records open_for's and open_max's
// lines for the check between them.
absl::Status ReadBreakerField(const YamlReader& reader, const std::string& key,
                              const std::string& path, const YAML::Node& node, int line,
                              CircuitBreakerConfig* out, int* open_for_line,
                              int* open_max_line) {
  if (key == "enabled") {
    return reader.GetBool(node, path, line, "enabled: true", &out->enabled);
  }
  if (key == "failure_ratio") {
    return ReadFailureRatio(reader, node, path, line, &out->failure_ratio);
  }
  for (const BreakerInt& s : kBreakerInts) {
    if (key == s.key) return reader.GetInt(node, path, line, 1, s.example, &(out->*s.field));
  }
  if (key == "open_for") *open_for_line = line;
  if (key == "open_max") *open_max_line = line;
  for (const BreakerDuration& s : kBreakerDurations) {
    if (key != s.key) continue;
    return reader.GetDuration(node, path, line, /*allow_zero=*/false, s.example,
                              &(out->*s.field));
  }
  return reader.Error(line, path, "unknown key");  // ForEachField passes only known keys
}

// `circuit_breaker: on` or a map of its knobs (a map turns it on unless it
// says `enabled: false`).
absl::Status ReadCircuitBreaker(const YamlReader& reader, const YAML::Node& value,
                                const std::string& path, int line,
                                CircuitBreakerConfig* out) {
  if (value.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected on, off or a map such as "
                                     "`{failure_ratio: 0.5, open_for: 1s}`, got ",
                                     Describe(value)));
  }
  if (!value.IsMap()) {
    return reader.GetBool(value, path, line, "circuit_breaker: on", &out->enabled);
  }
  out->enabled = true;
  int open_for_line = 0;
  int open_max_line = 0;
  absl::Status status = reader.ForEachField(
      value, path, line,
      {"enabled", "failure_ratio", "min_outcomes", "window", "open_for", "open_max", "probes"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& node,
          int node_line) -> absl::Status {
        return ReadBreakerField(reader, key, child, node, node_line, out, &open_for_line,
                                &open_max_line);
      });
  if (!status.ok()) return status;
  if (out->open_max < out->open_for) {
    const bool at_max = open_max_line > 0;
    return reader.Error(
        at_max ? open_max_line : open_for_line, Child(path, at_max ? "open_max" : "open_for"),
        absl::StrCat("open_max (", absl::FormatDuration(out->open_max),
                     at_max ? "" : ", the default", ") must not be shorter than open_for (",
                     absl::FormatDuration(out->open_for),
                     "): the breaker stays open open_for, doubling after each failed probe "
                     "up to open_max"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsProtectionKey(absl::string_view key) {
  for (absl::string_view k : kProtectionKeys) {
    if (key == k) return true;
  }
  return false;
}

absl::Status ReadProtectionSetting(const YamlReader& reader, const std::string& key,
                                   const std::string& path, const YAML::Node& value, int line,
                                   ProcessorConfig* processor, ConcurrencyLines* lines) {
  if (key == "rate_limit") return ReadRateLimit(reader, value, path, line, &processor->rate_limit);
  if (key == "concurrency") {
    return ReadConcurrency(reader, value, path, line, &processor->concurrency, lines);
  }
  return ReadCircuitBreaker(reader, value, path, line, &processor->circuit_breaker);
}

}  // namespace ferry
