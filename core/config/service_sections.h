// The sections that tune how ferry runs rather than what it consumes:
// `lanes`, `budgets` (limits on buffered and delayed events), `commit`,
// `shutdown`, `log`, `failures` (default policy, dead-letter topic, poison
// record size), `control`, `server` (listen addresses, metrics, health, TLS)
// and `embedded` (the in-process mock cluster). Each has the SectionParser
// signature (core/config/section.h); defaults that depend on other settings
// are applied after parsing (core/config/config_checks.h).
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_SERVICE_SECTIONS_H_
#define FERRY_CORE_CONFIG_SERVICE_SECTIONS_H_

#include "core/config/section.h"

namespace ferry {

absl::Status ParseLanesSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                               const std::string& path, int line, Config* config,
                               ParseNotes* notes);
absl::Status ParseBudgetsSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                 const std::string& path, int line, Config* config,
                                 ParseNotes* notes);
absl::Status ParseCommitSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes* notes);
absl::Status ParseShutdownSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes* notes);
absl::Status ParseLogSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                             const std::string& path, int line, Config* config,
                             ParseNotes* notes);
absl::Status ParseFailuresSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes* notes);
absl::Status ParseControlSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                 const std::string& path, int line, Config* config,
                                 ParseNotes* notes);
absl::Status ParseServerSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes* notes);
absl::Status ParseEmbeddedSection(config_yaml::YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes* notes);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_SERVICE_SECTIONS_H_
