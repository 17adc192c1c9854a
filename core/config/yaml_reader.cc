#include "core/config/yaml_reader.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace ferry::config_yaml {

int LineOf(const YAML::Node& node, int fallback) {
  if (!node.IsDefined() || node.IsNull()) return fallback;
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return fallback;
  return mark.line + 1;
}

std::string Child(const std::string& path, absl::string_view key) {
  if (path.empty()) return std::string(key);
  return absl::StrCat(path, ".", key);
}

std::string Index(const std::string& path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

// Short description of what a node holds, for "expected X, got Y" errors.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "an empty value";
    case YAML::NodeType::Scalar:
      return absl::StrCat("\"", absl::CEscape(node.Scalar()), "\"");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
    default:
      return "nothing";
  }
}

bool IsPlainScalar(const YAML::Node& node) {
  // yaml-cpp tags plain (unquoted) scalars "?" and quoted ones "!".
  return node.IsScalar() && node.Tag() != "!";
}

absl::Status YamlReader::ForEachField(const YAML::Node& node,
                                      const std::string& path, int line,
                                      const std::vector<std::string>& known,
                                      const FieldFn& fn) const {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) {
    return Error(line, path,
                 absl::StrCat("expected a map of `key: value` entries, got ",
                              Describe(node)));
  }
  std::map<std::string, int> seen;  // key -> line
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    const int key_line = LineOf(key_node, line);
    if (!key_node.IsScalar()) {
      return Error(key_line, path,
                   absl::StrCat("keys must be plain names, got ",
                                Describe(key_node)));
    }
    const std::string key = key_node.Scalar();
    const std::string child = Child(path, key);
    if (!known.empty()) {
      bool found = false;
      for (const auto& k : known) found = found || k == key;
      if (!found) {
        return Error(key_line, child,
                     absl::StrCat("unknown key (known keys: ",
                                  absl::StrJoin(known, ", "), ")"));
      }
    }
    auto [prev, inserted] = seen.emplace(key, key_line);
    if (!inserted) {
      return Error(key_line, child,
                   absl::StrCat("key is set twice (first on line ",
                                prev->second, "); keep only one"));
    }
    absl::Status status = fn(key, child, key_line, value,
                             LineOf(value, key_line));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status YamlReader::ForEachNamedEntry(const YAML::Node& node, const std::string& path,
                                           int line, bool allow_empty, absl::string_view what,
                                           absl::string_view name, const FieldFn& fn) const {
  if (node.IsNull() || !node.IsMap() || (!allow_empty && node.size() == 0)) {
    return Error(line, path, absl::StrCat("expected a map of ", what, ", got ", Describe(node)));
  }
  return ForEachField(node, path, line, {},
                      [&](const std::string& key, const std::string& child, int key_line,
                          const YAML::Node& value, int value_line) -> absl::Status {
                        if (absl::StripAsciiWhitespace(key).empty()) {
                          return Error(value_line, child,
                                       absl::StrCat(name, " must not be empty"));
                        }
                        return fn(key, child, key_line, value, value_line);
                      });
}

absl::Status YamlReader::GetScalar(const YAML::Node& node, const std::string& path,
                                   int line, absl::string_view example,
                                   std::string* out) const {
  if (node.IsNull()) {
    return Error(line, path,
                 absl::StrCat("missing value (write e.g. `", example, "`)"));
  }
  if (!node.IsScalar()) {
    return Error(line, path,
                 absl::StrCat("expected a single value such as `", example,
                              "`, got ", Describe(node)));
  }
  // `${NAME}` takes the environment variable NAME, so one file serves every
  // replica (e.g. `client.id: ${POD_NAME}` from the downward API).
  const std::string& text = node.Scalar();
  std::string expanded;
  size_t position = 0;
  while (true) {
    const size_t open = text.find("${", position);
    if (open == std::string::npos) break;
    const size_t close = text.find('}', open + 2);
    if (close == std::string::npos) {
      return Error(line, path,
                   "`${` without a closing `}`; write `${NAME}` to use the "
                   "environment variable NAME");
    }
    const std::string name = text.substr(open + 2, close - open - 2);
    const char* env = name.empty() ? nullptr : std::getenv(name.c_str());
    if (env == nullptr) {
      return Error(line, path,
                   absl::StrCat("environment variable ", name.empty() ? "\"\"" : name,
                                " is not set (the value uses `${", name,
                                "}`); set it or write the value here"));
    }
    absl::StrAppend(&expanded, text.substr(position, open - position), env);
    position = close + 1;
  }
  if (position == 0) {
    *out = text;
  } else {
    *out = absl::StrCat(expanded, text.substr(position));
  }
  return absl::OkStatus();
}

absl::Status YamlReader::GetNonEmptyString(const YAML::Node& node,
                                           const std::string& path, int line,
                                           absl::string_view example,
                                           std::string* out) const {
  std::string value;
  absl::Status status = GetScalar(node, path, line, example, &value);
  if (!status.ok()) return status;
  if (absl::StripAsciiWhitespace(value).empty()) {
    return Error(line, path,
                 absl::StrCat("must not be empty (write e.g. `", example,
                              "`)"));
  }
  *out = std::move(value);
  return absl::OkStatus();
}

absl::Status YamlReader::GetInt64(const YAML::Node& node, const std::string& path,
                                  int line, int64_t min, int64_t max,
                                  absl::string_view example, int64_t* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, example, &text);
  if (!status.ok()) return status;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    double d = 0;
    if (absl::SimpleAtod(text, &d) && std::isfinite(d) &&
        std::fabs(d) < 1e30) {
      return Error(line, path,
                   absl::StrCat("expected a whole number, got \"",
                                absl::CEscape(text), "\" (write e.g. `",
                                example, "`)"));
    }
    return Error(line, path,
                 absl::StrCat("expected an integer, got ", Describe(node),
                              " (write e.g. `", example, "`)"));
  }
  if (value < min) {
    return Error(line, path,
                 absl::StrCat("must be at least ", min, ", got ", value));
  }
  if (value > max) {
    return Error(line, path,
                 absl::StrCat("must be at most ", max, ", got ", value));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status YamlReader::GetInt(const YAML::Node& node, const std::string& path,
                                int line, int min, absl::string_view example,
                                int* out) const {
  int64_t value = 0;
  absl::Status status = GetInt64(node, path, line, min,
                                 std::numeric_limits<int>::max(), example,
                                 &value);
  if (!status.ok()) return status;
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status YamlReader::GetDuration(const YAML::Node& node,
                                     const std::string& path, int line,
                                     bool allow_zero, absl::string_view example,
                                     absl::Duration* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, example, &text);
  if (!status.ok()) return status;
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  double bare = 0;
  if (absl::SimpleAtod(trimmed, &bare)) {
    return Error(line, path,
                 absl::StrCat("duration \"", absl::CEscape(trimmed),
                              "\" has no unit; add one, e.g. `", trimmed,
                              "s` or `", trimmed, "ms`"));
  }
  absl::Duration d;
  if (!absl::ParseDuration(trimmed, &d) || d == absl::InfiniteDuration() ||
      d == -absl::InfiniteDuration()) {
    return Error(line, path,
                 absl::StrCat("invalid duration \"", absl::CEscape(trimmed),
                              "\" (use e.g. 500ms, 30s, 1m, 1h30m)"));
  }
  if (d < absl::ZeroDuration()) {
    return Error(line, path,
                 absl::StrCat("duration must not be negative, got ", trimmed));
  }
  if (!allow_zero && d == absl::ZeroDuration()) {
    return Error(line, path,
                 absl::StrCat("duration must be greater than zero (write e.g. `",
                              example, "`)"));
  }
  *out = d;
  return absl::OkStatus();
}

absl::Status YamlReader::GetBytes(const YAML::Node& node, const std::string& path,
                                  int line, int64_t* out) const {
  constexpr absl::string_view kHelp =
      "use a byte count such as 268435456 or a size with a unit: B, KiB, MiB, "
      "GiB (powers of 1024) or KB, MB, GB (powers of 1000), e.g. 256MiB";
  std::string text;
  absl::Status status = GetScalar(node, path, line, "256MiB", &text);
  if (!status.ok()) return status;
  absl::string_view s = absl::StripAsciiWhitespace(text);
  static const std::pair<absl::string_view, int64_t> kUnits[] = {
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20},
      {"GiB", int64_t{1} << 30}, {"KB", 1000},
      {"MB", 1000 * 1000},       {"GB", 1000 * 1000 * 1000},
      {"B", 1},
  };
  int64_t multiplier = 1;
  for (const auto& [suffix, factor] : kUnits) {
    if (absl::EndsWith(s, suffix)) {
      s.remove_suffix(suffix.size());
      s = absl::StripTrailingAsciiWhitespace(s);
      multiplier = factor;
      break;
    }
  }
  int64_t count = 0;
  if (s.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(s[0])) ||
      !absl::SimpleAtoi(s, &count)) {
    return Error(line, path,
                 absl::StrCat("invalid size \"", absl::CEscape(text), "\" (",
                              kHelp, ")"));
  }
  if (count > std::numeric_limits<int64_t>::max() / multiplier) {
    return Error(line, path,
                 absl::StrCat("size \"", absl::CEscape(text), "\" is too large"));
  }
  const int64_t bytes = count * multiplier;
  if (bytes < 1) {
    return Error(line, path, absl::StrCat("must be at least 1 byte, got ", text));
  }
  *out = bytes;
  return absl::OkStatus();
}

absl::Status YamlReader::GetFraction(const YAML::Node& node,
                                     const std::string& path, int line,
                                     double* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, "0.5", &text);
  if (!status.ok()) return status;
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return Error(line, path,
                 absl::StrCat("expected a number between 0 and 1 such as 0.5, "
                              "got ",
                              Describe(node)));
  }
  if (!(value > 0 && value < 1)) {
    return Error(line, path,
                 absl::StrCat("must be greater than 0 and less than 1 (e.g. "
                              "0.5), got ",
                              text));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status YamlReader::GetBool(const YAML::Node& node, const std::string& path,
                                 int line, absl::string_view example,
                                 bool* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, example, &text);
  if (!status.ok()) return status;
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes" || lower == "on") {
    *out = true;
  } else if (lower == "false" || lower == "no" || lower == "off") {
    *out = false;
  } else {
    return Error(line, path,
                 absl::StrCat("expected true or false, got \"",
                              absl::CEscape(text), "\""));
  }
  return absl::OkStatus();
}

absl::Status YamlReader::GetListenAddress(const YAML::Node& node,
                                          const std::string& path, int line,
                                          std::string* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, "127.0.0.1:7070", &text);
  if (!status.ok()) return status;
  const absl::Status bad = Error(
      line, path,
      absl::StrCat("expected host:port (e.g. 127.0.0.1:7070, 0.0.0.0:7070, "
                   "[::1]:7070; port 0 picks a free port), got \"",
                   absl::CEscape(text), "\""));
  absl::string_view host;
  absl::string_view port;
  absl::string_view s = text;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == absl::string_view::npos || close + 1 >= s.size() ||
        s[close + 1] != ':') {
      return bad;
    }
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    const size_t colon = s.rfind(':');
    if (colon == absl::string_view::npos) return bad;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) return bad;
  }
  if (host.empty() || port.empty() || port.size() > 5) return bad;
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return bad;
  }
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number > 65535) return bad;
  *out = text;
  return absl::OkStatus();
}


YamlReader::YamlReader(absl::string_view source_name) : source_(source_name) {}

absl::Status YamlReader::Error(int line, absl::string_view path,
                                   absl::string_view what) const {
  if (line < 1) line = 1;
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", source_, line, what));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s: %s", source_, line, path, what));
}

std::map<std::string, std::string> YamlReader::Locations() const {
  std::map<std::string, std::string> out;
  for (const auto& [path, line] : lines_) out[path] = absl::StrCat(source_, ":", line);
  return out;
}

absl::Status YamlReader::UnknownName(int line, const std::string& path,
                                         absl::string_view what, const std::string& text,
                                         const std::vector<absl::string_view>& names) const {
  // "a, b or c"
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    absl::StrAppend(&list, names[i]);
  }
  return Error(line, path,
               absl::StrCat("unknown ", what, " \"", absl::CEscape(text), "\" (use ",
                            list, ")"));
}

}  // namespace ferry::config_yaml
