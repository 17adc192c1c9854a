#include "core/config/kafka_section.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {

using config_yaml::IsPlainScalar;
using config_yaml::YamlReader;

absl::Status ParseKafkaSection(YamlReader& reader, const YAML::Node& node,
                               const std::string& path, int line, Config* config,
                               ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {},
      [&](const std::string& key, const std::string& child, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        std::string text;
        absl::Status status = reader.GetScalar(value, child, value_line,
                                               absl::StrCat(key, ": <value>"), &text);
        if (!status.ok()) return status;
        reader.Locate(child, value_line);
        if (IsPlainScalar(value)) {
          // YAML booleans in any case go to librdkafka as true/false.
          const std::string lower = absl::AsciiStrToLower(text);
          if (lower == "true" || lower == "false") text = lower;
        }
        if (key == "enable.auto.commit" || key == "enable.auto.offset.store") {
          const std::string lower = absl::AsciiStrToLower(text);
          if (lower != "false" && lower != "f" && lower != "0") {
            return reader.Error(value_line, child,
                                "ferry stores and commits offsets itself, only after "
                                "events finish; remove this key (or set it to false)");
          }
        }
        config->kafka[key] = text;
        return absl::OkStatus();
      });
}

}  // namespace ferry
