// The topics and how their records are routed: `topics:` (name, ordering,
// key and type sources, delays, priority class) and `priorities:` (classes
// and their weights, the default class, classes by event type). Which class
// and processor each topic ends up with is checked after parsing
// (core/config/config_checks.h), from the lines recorded in ParseNotes.
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_TOPIC_SECTION_H_
#define FERRY_CORE_CONFIG_TOPIC_SECTION_H_

#include "core/config/section.h"

namespace ferry {

// `topics:`, a non-empty list of at most kMaxTopics unique names.
absl::Status ParseTopicsSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes* notes);

// `priorities:`; `classes` is required.
absl::Status ParsePrioritiesSection(config_yaml::YamlReader& reader,
                                    const YAML::Node& node, const std::string& path,
                                    int line, Config* config, ParseNotes* notes);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_TOPIC_SECTION_H_
