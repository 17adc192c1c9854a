// What ParseConfig does after every section is read: defaults that depend on
// other settings (group.id, the control topic's name, the metrics address,
// the failure policy, the lane count, the delay budget) and the checks that
// span sections or keys (required sections, dead-letter topics, adaptive
// concurrency limits within streams x max_in_flight, priority classes that
// exist, event types known at startup that no processor handles). The
// errors point at the lines ParseNotes recorded.
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_CONFIG_CHECKS_H_
#define FERRY_CORE_CONFIG_CONFIG_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "core/config/config_types.h"
#include "core/config/section.h"
#include "core/config/yaml_reader.h"

namespace ferry {

absl::Status ApplyDefaultsAndCheck(const config_yaml::YamlReader& reader,
                                   const ParseNotes& notes, Config* config);

// server.metrics_listen when unset: server.listen's host with the metrics
// port 9464, or port 0 when server.listen picks a free port (so tests that
// run many ferry processes at once never collide).
std::string DefaultMetricsListenAddress(const std::string& listen_address);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_CONFIG_CHECKS_H_
