// The `kafka:` section: librdkafka properties passed through as strings.
// Each value's line is recorded (Config::locations) so the property check
// after parsing (CheckConfigReferences) can point at it. ferry commits
// offsets itself, so enabling auto commit or auto offset store is refused.
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_KAFKA_SECTION_H_
#define FERRY_CORE_CONFIG_KAFKA_SECTION_H_

#include "core/config/section.h"

namespace ferry {

absl::Status ParseKafkaSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                               const std::string& path, int line, Config* config,
                               ParseNotes* notes);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_KAFKA_SECTION_H_
