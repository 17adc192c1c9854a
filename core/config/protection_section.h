// The settings of a `processors[]` entry that protect what its workers call
// (README "Protecting downstream"): `rate_limit`, `concurrency` and
// `circuit_breaker`, each a short scalar form (`rate_limit: 200/s`,
// `concurrency: adaptive`, `circuit_breaker: on`) or a map of its knobs, read
// into RateLimitConfig, ConcurrencyConfig and CircuitBreakerConfig with
// located errors. processor_section calls in here for these keys; the check
// of concurrency limits against streams x max_in_flight (settings of the
// same entry that may come later) is in config_checks, at the lines recorded
// here.
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_PROTECTION_SECTION_H_
#define FERRY_CORE_CONFIG_PROTECTION_SECTION_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/config/section.h"

namespace ferry {

// The keys ReadProtectionSetting reads, for the processor's known keys.
inline constexpr absl::string_view kProtectionKeys[] = {"rate_limit", "concurrency",
                                                        "circuit_breaker"};
bool IsProtectionKey(absl::string_view key);

// Reads `key` (one of kProtectionKeys) of a processor entry into `processor`;
// `path` is the key's dotted path, `line` the value's (the key's when it is
// empty). Records where concurrency limits were written in `lines`.
absl::Status ReadProtectionSetting(const config_yaml::YamlReader& reader,
                                   const std::string& key, const std::string& path,
                                   const YAML::Node& value, int line,
                                   ProcessorConfig* processor, ConcurrencyLines* lines);

// Most events per second a rate limit may allow: above it the bucket would
// never be the limit (and the refill arithmetic stays exact in a double).
inline constexpr double kMaxEventsPerSecond = 1e9;
inline constexpr int64_t kMaxBurst = 1000000000;

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_PROTECTION_SECTION_H_
