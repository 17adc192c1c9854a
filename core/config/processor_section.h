// The `processors:` section: the worker pools events go to (gRPC target,
// streams, credit, batching, deadlines, retries, failure policy, TLS,
// keepalive; rate limit, concurrency and circuit breaker through
// protection_section), and which event types each one claims (every type at
// most once, "*" by at most one processor).
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_PROCESSOR_SECTION_H_
#define FERRY_CORE_CONFIG_PROCESSOR_SECTION_H_

#include "core/config/section.h"

namespace ferry {

// A non-empty list of at most kMaxProcessors uniquely named processors.
absl::Status ParseProcessorsSection(config_yaml::YamlReader& reader,
                                    const YAML::Node& node, const std::string& path,
                                    int line, Config* config, ParseNotes* notes);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_PROCESSOR_SECTION_H_
