// ParseConfig: YAML text -> Config. The pipeline: size and value-count
// limits (before yaml-cpp builds a tree), one YAML document, the top-level
// sections (each parsed by its own component, see section.h), then defaults
// and cross-field checks (config_checks.h). LoadConfigFile and the checks
// that read files are in config_load.cc.
#include "core/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/config/config_checks.h"
#include "core/config/kafka_section.h"
#include "core/config/processor_section.h"
#include "core/config/section.h"
#include "core/config/service_sections.h"
#include "core/config/topic_section.h"
#include "core/config/yaml_limits.h"
#include "core/config/yaml_reader.h"

namespace ferry {
namespace {

using config_yaml::Describe;
using config_yaml::LineOf;
using config_yaml::YamlReader;

struct Section {
  const char* key;
  SectionParser parse;
};

// In the order the "known keys" of an unknown top-level key list them.
constexpr Section kSections[] = {
    {"kafka", ParseKafkaSection},        {"topics", ParseTopicsSection},
    {"processors", ParseProcessorsSection}, {"lanes", ParseLanesSection},
    {"budgets", ParseBudgetsSection},    {"commit", ParseCommitSection},
    {"shutdown", ParseShutdownSection},  {"log", ParseLogSection},
    {"server", ParseServerSection},      {"embedded", ParseEmbeddedSection},
    {"failures", ParseFailuresSection},  {"control", ParseControlSection},
    {"priorities", ParsePrioritiesSection},
};

absl::Status ParseRoot(YamlReader& reader, const YAML::Node& root, Config* config) {
  if (root.IsNull() || !root.IsDefined()) {
    return reader.Error(1, "",
                        "the configuration is empty; it needs at least `topics` and "
                        "`processors`");
  }
  ParseNotes notes;
  notes.root_line = LineOf(root, 1);
  notes.failures_line = notes.root_line;
  if (!root.IsMap()) {
    return reader.Error(notes.root_line, "",
                        absl::StrCat("expected a map of settings at the top level "
                                     "(kafka, topics, processors, ...), got ",
                                     Describe(root)));
  }
  std::vector<std::string> known;
  for (const Section& section : kSections) known.push_back(section.key);
  absl::Status status = reader.ForEachField(
      root, "", notes.root_line, known,
      [&](const std::string& key, const std::string& path, int, const YAML::Node& value,
          int value_line) -> absl::Status {
        for (const Section& section : kSections) {
          if (key == section.key) {
            return section.parse(reader, value, path, value_line, config, &notes);
          }
        }
        return absl::OkStatus();  // not reached: ForEachField checked `known`
      });
  if (!status.ok()) return status;
  return ApplyDefaultsAndCheck(reader, notes, config);
}

}  // namespace

absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text,
                                   absl::string_view source_name) {
  YamlReader reader(source_name);
  if (yaml_text.size() > static_cast<size_t>(kMaxConfigFileBytes)) {
    // The line where the limit is crossed, so the operator sees where the
    // file went wrong (a generated list, a pasted blob).
    const absl::string_view kept = yaml_text.substr(0, kMaxConfigFileBytes);
    return reader.Error(1 + static_cast<int>(std::count(kept.begin(), kept.end(), '\n')), "",
                        absl::StrCat("the configuration is over the limit of ",
                                     kMaxConfigFileBytes, " bytes (1 MiB) here; "
                                     "a ferry config is a few kilobytes"));
  }
  try {
    const std::string text(yaml_text);
    const YamlScan scan = ScanYaml(text, kMaxConfigValues);
    if (scan.line_over_limit > 0) {
      return reader.Error(scan.line_over_limit, "",
                          absl::StrCat("more than ", kMaxConfigValues,
                                       " YAML values; a ferry config has hundreds"));
    }
    if (scan.documents > 1) {
      return reader.Error(scan.second_document_line, "",
                          "expected one YAML document, found more; remove the extra `---` "
                          "separators");
    }
    // The first (only) document; never YAML::LoadAll (see core/config/yaml_limits.h).
    const YAML::Node document = scan.documents == 0 ? YAML::Node() : YAML::Load(text);
    Config config;
    absl::Status status =
        ParseRoot(reader, document, &config);
    if (!status.ok()) return status;
    config.locations = reader.Locations();
    return config;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return reader.Error(line, "",
                        absl::StrCat("invalid YAML: ",
                                     e.msg.empty() ? e.what() : e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": cannot parse configuration: ", e.what()));
  }
}

}  // namespace ferry
