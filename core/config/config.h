// ferry's configuration: one YAML file, parsed and validated once at startup.
//
// Parsing never touches Kafka or the network. Every error names the offending
// key (as a dotted path such as `processors[0].timeout`) and the file line, so
// an operator knows exactly what to change. Unknown keys are errors, not
// warnings: a typo must not silently fall back to a default.
//
// Threading: Config is a plain value; build it once, then share it read-only.
#ifndef FERRY_CORE_CONFIG_CONFIG_H_
#define FERRY_CORE_CONFIG_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/config/config_types.h"  // IWYU pragma: export

namespace ferry {

// Parses YAML text. `source_name` (usually the file path) prefixes errors.
// Errors are InvalidArgument with a message like
//   "ferry.yaml:12: processors[0].timeout: invalid duration "3 sec" (use e.g. 500ms, 30s)".
absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text,
                                   absl::string_view source_name);

// Reads and parses a file, then runs CheckConfigReferences. NotFound if it
// cannot be read; InvalidArgument (with the line where the limit is crossed)
// if it is bigger than kMaxConfigFileBytes, which is checked before parsing.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

// What ParseConfig cannot check from the text alone (it touches no file and
// no library, so that it stays a pure function of its input): every `kafka:`
// property is one librdkafka accepts, and every file a setting names can be
// read and is neither empty nor over 1 MiB. Errors carry the setting's file
// and line: `ferry.yaml:146: control.token_file: cannot read /x: ...`.
absl::Status CheckConfigReferences(const Config& config);

// `status` with the config file and line of the setting it names prefixed,
// when its message starts with a setting in config.locations (e.g. the
// `server.tls.cert_file: ... holds no PEM certificate` of a reader that
// runs at startup); otherwise `status` unchanged.
absl::Status LocateConfigError(const Config& config, const absl::Status& status);

// The configuration ferry runs with when started with no --config: the
// embedded mock cluster, one topic `events`, one processor at 127.0.0.1:50051.
std::string EmbeddedDefaultConfigYaml();

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_CONFIG_H_
