// A small toolkit for reading a YAML tree into typed values with located
// errors, used by every section parser of core/config. Every error it makes
// has the form `<source>:<line>: <dotted.path>: <what>` (InvalidArgument), so
// an operator sees the file line and the key to change.
//
// Lines: yaml-cpp places an empty (null) value on the line after its key, so
// callers pass the key's line and readers use it for null values (LineOf).
//
// Threading: one YamlReader per parse, used by the parsing thread only.
#ifndef FERRY_CORE_CONFIG_YAML_READER_H_
#define FERRY_CORE_CONFIG_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry::config_yaml {

// 1-based line of `node`, or `fallback` when the node has no useful position
// (always for null nodes, see above).
int LineOf(const YAML::Node& node, int fallback);
// `path.key` (or `key` at the top level) and `path[i]`.
std::string Child(const std::string& path, absl::string_view key);
std::string Index(const std::string& path, size_t i);
// What a node holds, for "expected X, got Y" errors: `"text"`, `a list`, ...
std::string Describe(const YAML::Node& node);
// An unquoted scalar (yaml-cpp tags plain scalars "?" and quoted ones "!").
bool IsPlainScalar(const YAML::Node& node);

// One spelling of an enum value in the config, for YamlReader::GetEnum.
template <typename E>
struct EnumName {
  absl::string_view name;
  E value;
};

class YamlReader {
 public:
  // Called for each entry of a map: its key, dotted path, the key's line,
  // the value and the value's line.
  using FieldFn = std::function<absl::Status(
      const std::string& key, const std::string& path, int key_line,
      const YAML::Node& value, int value_line)>;

  // `source_name` (usually the file path) prefixes every error.
  explicit YamlReader(absl::string_view source_name);

  // `<source>:<line>: <path>: <what>` (no `<path>: ` when path is empty).
  absl::Status Error(int line, absl::string_view path, absl::string_view what) const;

  // Walks the entries of the map `node` (at `path`, first seen on `line`).
  // Rejects non-maps, non-scalar keys, duplicated keys and keys not in
  // `known`, then calls `fn` for each entry. A null node (an empty section
  // such as `lanes:` with nothing under it) has no entries. An empty `known`
  // accepts every key (used for `kafka`).
  absl::Status ForEachField(const YAML::Node& node, const std::string& path, int line,
                            const std::vector<std::string>& known,
                            const FieldFn& fn) const;

  // A map keyed by free-form names (event types, class names): refuses an
  // empty value or a non-map with `expected a map of <what>, got ...` (and an
  // empty map unless `allow_empty`), and a blank name with `<name> must not
  // be empty`; then calls `fn` for each entry like ForEachField.
  absl::Status ForEachNamedEntry(const YAML::Node& node, const std::string& path, int line,
                                 bool allow_empty, absl::string_view what,
                                 absl::string_view name, const FieldFn& fn) const;

  // Scalar readers. `path` and `line` locate the value; `example` is shown in
  // errors as what to write instead. `${NAME}` in a scalar takes the
  // environment variable NAME.
  absl::Status GetScalar(const YAML::Node& node, const std::string& path, int line,
                         absl::string_view example, std::string* out) const;
  absl::Status GetNonEmptyString(const YAML::Node& node, const std::string& path,
                                 int line, absl::string_view example,
                                 std::string* out) const;
  absl::Status GetInt64(const YAML::Node& node, const std::string& path, int line,
                        int64_t min, int64_t max, absl::string_view example,
                        int64_t* out) const;
  // An int in [min, INT_MAX].
  absl::Status GetInt(const YAML::Node& node, const std::string& path, int line,
                      int min, absl::string_view example, int* out) const;
  // A duration with a unit (500ms, 30s, 1h30m), never negative.
  absl::Status GetDuration(const YAML::Node& node, const std::string& path, int line,
                           bool allow_zero, absl::string_view example,
                           absl::Duration* out) const;
  // A byte count, bare or with a unit (B, KiB, MiB, GiB, KB, MB, GB); >= 1.
  absl::Status GetBytes(const YAML::Node& node, const std::string& path, int line,
                        int64_t* out) const;
  // A number strictly between 0 and 1.
  absl::Status GetFraction(const YAML::Node& node, const std::string& path, int line,
                           double* out) const;
  // true/yes/on or false/no/off, in any case.
  absl::Status GetBool(const YAML::Node& node, const std::string& path, int line,
                       absl::string_view example, bool* out) const;
  // host:port (or [v6]:port), port 0..65535.
  absl::Status GetListenAddress(const YAML::Node& node, const std::string& path,
                                int line, std::string* out) const;

  // One of `names` (the first is the example). Otherwise:
  // `unknown <what> "x" (use a, b or c)`.
  template <typename E>
  absl::Status GetEnum(const YAML::Node& node, const std::string& path, int line,
                       absl::string_view what, std::initializer_list<EnumName<E>> names,
                       E* out) const {
    std::vector<absl::string_view> spellings;
    for (const EnumName<E>& name : names) spellings.push_back(name.name);
    std::string text;
    absl::Status status = GetScalar(node, path, line, spellings.front(), &text);
    if (!status.ok()) return status;
    for (const EnumName<E>& name : names) {
      if (text == name.name) {
        *out = name.value;
        return absl::OkStatus();
      }
    }
    return UnknownName(line, path, what, text, spellings);
  }

  // Records where a setting checked after parsing was written (see
  // Config::locations), and returns them as `<source>:<line>` by path.
  void Locate(const std::string& path, int line) { lines_[path] = line; }
  std::map<std::string, std::string> Locations() const;

 private:
  absl::Status UnknownName(int line, const std::string& path, absl::string_view what,
                           const std::string& text,
                           const std::vector<absl::string_view>& names) const;

  std::string source_;
  std::map<std::string, int> lines_;  // Locate()d settings, by path
};

}  // namespace ferry::config_yaml

#endif  // FERRY_CORE_CONFIG_YAML_READER_H_
