#include "core/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <set>
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
#include "core/config/yaml_limits.h"

namespace ferry {
namespace {

// Every ParseConfig error goes through here so the format stays
// `<source>:<line>: <path>: <what>`.
class Parser {
 public:
  explicit Parser(absl::string_view source_name) : source_(source_name) {}

  absl::Status Error(int line, absl::string_view path,
                     absl::string_view what) const {
    if (line < 1) line = 1;
    if (path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: %s", source_, line, what));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: %s: %s", source_, line, path, what));
  }

  absl::Status Parse(const YAML::Node& root, Config* config);

  // Config::locations: `<source>:<line>` of the settings Locate recorded.
  std::map<std::string, std::string> Locations() const {
    std::map<std::string, std::string> out;
    for (const auto& [path, line] : lines_) out[path] = absl::StrCat(source_, ":", line);
    return out;
  }

 private:
  using FieldFn = std::function<absl::Status(
      const std::string& key, const std::string& path, int key_line,
      const YAML::Node& value, int value_line)>;

  // Walks the entries of the map `node` (at `path`, first seen on `line`).
  // Rejects non-maps, non-scalar keys, duplicated keys and keys not in
  // `known`, then calls `fn` for each entry. A null node (an empty section
  // such as `lanes:` with nothing under it) has no entries. An empty `known`
  // accepts every key (used for `kafka`).
  absl::Status ForEachField(const YAML::Node& node, const std::string& path,
                            int line,
                            const std::vector<std::string>& known,
                            const FieldFn& fn) const;

  absl::Status ParseKafka(const YAML::Node& node, int line, Config* config);
  absl::Status ParseTopics(const YAML::Node& node, int line, Config* config);
  absl::Status ParseTopic(const YAML::Node& node, const std::string& path,
                          int line, TopicConfig* topic, int* name_line);
  absl::Status ParseProcessors(const YAML::Node& node, int line,
                               Config* config);
  // `priorities:` (classes, default, event_types).
  absl::Status ParsePriorities(const YAML::Node& node, const std::string& path,
                               int line, Config* config);
  // After everything is parsed: priority classes named by topics and event
  // types exist, delay budget defaults, and event types known at startup
  // (`type: const:X`, `type: topic`) have a processor.
  absl::Status CheckScheduling(int root_line, bool has_max_delayed_events,
                               Config* config) const;
  absl::Status ParseProcessor(const YAML::Node& node, const std::string& path,
                              int line, ProcessorConfig* processor,
                              int* name_line, int* event_types_line);

  // Scalar readers. `path` and `line` locate the value for errors.
  absl::Status GetScalar(const YAML::Node& node, const std::string& path,
                         int line, absl::string_view example,
                         std::string* out) const;
  absl::Status GetNonEmptyString(const YAML::Node& node,
                                 const std::string& path, int line,
                                 absl::string_view example,
                                 std::string* out) const;
  absl::Status GetInt64(const YAML::Node& node, const std::string& path,
                        int line, int64_t min, int64_t max,
                        absl::string_view example, int64_t* out) const;
  absl::Status GetInt(const YAML::Node& node, const std::string& path,
                      int line, int min, absl::string_view example,
                      int* out) const;
  absl::Status GetDuration(const YAML::Node& node, const std::string& path,
                           int line, bool allow_zero,
                           absl::string_view example,
                           absl::Duration* out) const;
  absl::Status GetBytes(const YAML::Node& node, const std::string& path,
                        int line, int64_t* out) const;
  absl::Status GetFraction(const YAML::Node& node, const std::string& path,
                           int line, double* out) const;
  absl::Status GetFieldSource(const YAML::Node& node, const std::string& path,
                              int line, FieldSource* out) const;
  absl::Status GetOrdering(const YAML::Node& node, const std::string& path,
                           int line, Ordering* out) const;
  absl::Status GetListenAddress(const YAML::Node& node,
                                const std::string& path, int line,
                                std::string* out) const;
  absl::Status GetBool(const YAML::Node& node, const std::string& path,
                       int line, absl::string_view example, bool* out) const;
  absl::Status GetFailurePolicy(const YAML::Node& node,
                                const std::string& path, int line,
                                FailurePolicy* out) const;
  // `tls:` of server.tls (`server` true) or processors[i].tls.
  absl::Status GetTls(const YAML::Node& node, const std::string& path,
                      int line, bool server, TlsFiles* out) const;
  // processors[i].keepalive: {interval, timeout}, each at least its minimum.
  absl::Status GetKeepalive(const YAML::Node& node, const std::string& path,
                            int line, KeepaliveConfig* out) const;

  std::string source_;
  // Lines of settings checked after parsing (kafka.*, files), by path.
  mutable std::map<std::string, int> lines_;
  void Locate(const std::string& path, int line) const { lines_[path] = line; }
  // Lines of each topic's keys, for errors found after parsing (in
  // topics order).
  struct TopicLines {
    int item = 1;
    int name = 1;
    int type = 0;      // 0: not set
    int priority = 0;  // 0: not set
  };
  std::vector<TopicLines> topic_lines_;
  // Lines under `priorities:`.
  int priorities_line_ = 0;
  int default_priority_line_ = 0;
  std::map<std::string, int> priority_by_type_lines_;
};

// 1-based line of `node`, or `fallback` when the node carries no useful
// position. yaml-cpp places an empty (null) value on the line *after* its key,
// so null nodes always use the fallback (normally the key's line).
int LineOf(const YAML::Node& node, int fallback) {
  if (!node.IsDefined() || node.IsNull()) return fallback;
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return fallback;
  return mark.line + 1;
}

// server.metrics_listen when unset: server.listen's host with the metrics
// port 9464, or port 0 when server.listen picks a free port (so tests that
// run many ferry processes at once never collide).
std::string DefaultMetricsListenAddress(const std::string& listen_address) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos) return "127.0.0.1:9464";
  const std::string host = listen_address.substr(0, colon);
  const std::string port = listen_address.substr(colon + 1);
  return absl::StrCat(host, ":", port == "0" ? "0" : "9464");
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

absl::Status Parser::ForEachField(const YAML::Node& node,
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

absl::Status Parser::GetScalar(const YAML::Node& node, const std::string& path,
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

absl::Status Parser::GetNonEmptyString(const YAML::Node& node,
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

absl::Status Parser::GetInt64(const YAML::Node& node, const std::string& path,
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

absl::Status Parser::GetInt(const YAML::Node& node, const std::string& path,
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

absl::Status Parser::GetDuration(const YAML::Node& node,
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

absl::Status Parser::GetBytes(const YAML::Node& node, const std::string& path,
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

absl::Status Parser::GetFraction(const YAML::Node& node,
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

absl::Status Parser::GetFieldSource(const YAML::Node& node,
                                    const std::string& path, int line,
                                    FieldSource* out) const {
  constexpr absl::string_view kHelp =
      "use record_key, header:NAME, json:/json/pointer, topic or const:VALUE";
  std::string text;
  absl::Status status = GetScalar(node, path, line, "header:event-type", &text);
  if (!status.ok()) return status;
  absl::string_view s = text;
  if (s == "record_key") {
    *out = FieldSource{FieldSource::Kind::kRecordKey, ""};
  } else if (s == "topic") {
    *out = FieldSource{FieldSource::Kind::kTopic, ""};
  } else if (absl::ConsumePrefix(&s, "header:")) {
    if (s.empty()) {
      return Error(line, path,
                   "header: needs a header name, e.g. header:event-type");
    }
    *out = FieldSource{FieldSource::Kind::kHeader, std::string(s)};
  } else if (absl::ConsumePrefix(&s, "json:")) {
    if (s.empty() || s[0] != '/') {
      return Error(line, path,
                   absl::StrCat("invalid JSON Pointer \"", absl::CEscape(s),
                                "\": it must start with '/', e.g. "
                                "json:/user/id"));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '~' && (i + 1 == s.size() || (s[i + 1] != '0' &&
                                                 s[i + 1] != '1'))) {
        return Error(line, path,
                     absl::StrCat("invalid JSON Pointer \"", absl::CEscape(s),
                                  "\": '~' must be followed by 0 (for '~') or "
                                  "1 (for '/')"));
      }
    }
    *out = FieldSource{FieldSource::Kind::kJson, std::string(s)};
  } else if (absl::ConsumePrefix(&s, "const:")) {
    if (s.empty()) {
      return Error(line, path, "const: needs a value, e.g. const:order");
    }
    *out = FieldSource{FieldSource::Kind::kConstant, std::string(s)};
  } else {
    return Error(line, path,
                 absl::StrCat("unknown source \"", absl::CEscape(text), "\" (",
                              kHelp, ")"));
  }
  return absl::OkStatus();
}

absl::Status Parser::GetOrdering(const YAML::Node& node,
                                 const std::string& path, int line,
                                 Ordering* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, "key", &text);
  if (!status.ok()) return status;
  if (text == "key") {
    *out = Ordering::kKey;
  } else if (text == "partition") {
    *out = Ordering::kPartition;
  } else if (text == "unordered") {
    *out = Ordering::kUnordered;
  } else {
    return Error(line, path,
                 absl::StrCat("unknown ordering \"", absl::CEscape(text),
                              "\" (use key, partition or unordered)"));
  }
  return absl::OkStatus();
}

absl::Status Parser::GetBool(const YAML::Node& node, const std::string& path,
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

absl::Status Parser::GetFailurePolicy(const YAML::Node& node,
                                      const std::string& path, int line,
                                      FailurePolicy* out) const {
  std::string text;
  absl::Status status = GetScalar(node, path, line, "dlq", &text);
  if (!status.ok()) return status;
  if (text == "dlq") {
    *out = FailurePolicy::kDeadLetter;
  } else if (text == "skip") {
    *out = FailurePolicy::kSkip;
  } else if (text == "block") {
    *out = FailurePolicy::kBlock;
  } else {
    return Error(line, path,
                 absl::StrCat("unknown policy \"", absl::CEscape(text),
                              "\" (use dlq, skip or block)"));
  }
  return absl::OkStatus();
}

absl::Status Parser::GetListenAddress(const YAML::Node& node,
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

absl::Status Parser::ParseKafka(const YAML::Node& node, int line,
                                Config* config) {
  return ForEachField(
      node, "kafka", line, {},
      [&](const std::string& key, const std::string& path, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        std::string text;
        absl::Status status =
            GetScalar(value, path, value_line, absl::StrCat(key, ": <value>"),
                      &text);
        if (!status.ok()) return status;
        Locate(path, value_line);
        if (IsPlainScalar(value)) {
          // YAML booleans in any case go to librdkafka as true/false.
          const std::string lower = absl::AsciiStrToLower(text);
          if (lower == "true" || lower == "false") text = lower;
        }
        if (key == "enable.auto.commit" || key == "enable.auto.offset.store") {
          const std::string lower = absl::AsciiStrToLower(text);
          if (lower != "false" && lower != "f" && lower != "0") {
            return Error(value_line, path,
                         "ferry stores and commits offsets itself, only after "
                         "events finish; remove this key (or set it to false)");
          }
        }
        config->kafka[key] = text;
        return absl::OkStatus();
      });
}

absl::Status Parser::ParseTopic(const YAML::Node& node,
                                const std::string& path, int line,
                                TopicConfig* topic, int* name_line) {
  if (!node.IsMap()) {
    return Error(line, path,
                 absl::StrCat("expected a map with at least `name`, e.g. "
                              "`- name: orders`, got ",
                              Describe(node)));
  }
  bool has_name = false;
  TopicLines lines;
  lines.item = line;
  absl::Status status = ForEachField(
      node, path, line,
      {"name", "ordering", "key", "type", "delay", "delays", "priority"},
      [&](const std::string& key, const std::string& child, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        if (key == "name") {
          has_name = true;
          *name_line = value_line;
          lines.name = value_line;
          return GetNonEmptyString(value, child, value_line, "name: orders",
                                   &topic->name);
        }
        if (key == "ordering") {
          return GetOrdering(value, child, value_line, &topic->ordering);
        }
        if (key == "key") {
          return GetFieldSource(value, child, value_line, &topic->key);
        }
        if (key == "delay") {
          return GetDuration(value, child, value_line, /*allow_zero=*/true,
                             "delay: 30s", &topic->delay);
        }
        if (key == "delays") {
          if (value.IsNull() || !value.IsMap()) {
            return Error(value_line, child,
                         absl::StrCat("expected a map of event type to delay, "
                                      "e.g. `delays: {order.reminder: 1h}`, "
                                      "got ",
                                      Describe(value)));
          }
          return ForEachField(
              value, child, value_line, {},
              [&](const std::string& type, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (absl::StripAsciiWhitespace(type).empty()) {
                  return Error(l, p, "an event type must not be empty");
                }
                absl::Duration delay;
                absl::Status got = GetDuration(v, p, l, /*allow_zero=*/true,
                                               absl::StrCat(type, ": 1h"), &delay);
                if (!got.ok()) return got;
                topic->delays[type] = delay;
                return absl::OkStatus();
              });
        }
        if (key == "priority") {
          lines.priority = value_line;
          return GetNonEmptyString(value, child, value_line, "priority: high",
                                   &topic->priority);
        }
        lines.type = value_line;
        return GetFieldSource(value, child, value_line, &topic->type);
      });
  topic_lines_.push_back(lines);
  if (!status.ok()) return status;
  if (!has_name) {
    return Error(line, Child(path, "name"),
                 "missing; every topic needs a name, e.g. `- name: orders`");
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseTopics(const YAML::Node& node, int line,
                                 Config* config) {
  const std::string path = "topics";
  if (node.IsNull() || (node.IsSequence() && node.size() == 0)) {
    return Error(line, path,
                 "needs at least one topic, e.g.\n  topics:\n    - name: orders");
  }
  if (!node.IsSequence()) {
    return Error(line, path,
                 absl::StrCat("expected a list of topics (`- name: orders`), "
                              "got ",
                              Describe(node)));
  }
  if (node.size() > kMaxTopics) {
    return Error(line, path, absl::StrCat(node.size(), " topics; at most ", kMaxTopics,
                                          " are supported"));
  }
  std::map<std::string, size_t> seen;
  size_t i = 0;
  for (auto it = node.begin(); it != node.end(); ++it, ++i) {
    const std::string item_path = Index(path, i);
    const int item_line = LineOf(*it, line);
    TopicConfig topic;
    int name_line = item_line;
    absl::Status status = ParseTopic(*it, item_path, item_line, &topic,
                                     &name_line);
    if (!status.ok()) return status;
    auto [prev, inserted] = seen.emplace(topic.name, i);
    if (!inserted) {
      return Error(name_line, Child(item_path, "name"),
                   absl::StrCat("topic \"", topic.name,
                                "\" is listed twice (first as topics[",
                                prev->second, "]); merge the two entries"));
    }
    config->topics.push_back(std::move(topic));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseProcessor(const YAML::Node& node,
                                    const std::string& path, int line,
                                    ProcessorConfig* processor, int* name_line,
                                    int* event_types_line) {
  if (!node.IsMap()) {
    return Error(line, path,
                 absl::StrCat("expected a map with at least `name` and "
                              "`target`, got ",
                              Describe(node)));
  }
  bool has_name = false;
  bool has_target = false;
  absl::Status status = ForEachField(
      node, path, line,
      {"name", "target", "event_types", "streams", "max_in_flight",
       "max_batch", "max_batch_bytes", "timeout", "max_attempts",
       "retry_backoff", "retry_backoff_max", "retry_on_timeout", "on_failure",
       "dead_letter_topic", "tls", "keepalive"},
      [&](const std::string& key, const std::string& child, int key_line,
          const YAML::Node& value, int value_line) -> absl::Status {
        if (key == "name") {
          has_name = true;
          *name_line = value_line;
          return GetNonEmptyString(value, child, value_line, "name: default",
                                   &processor->name);
        }
        if (key == "target") {
          has_target = true;
          return GetNonEmptyString(value, child, value_line,
                                   "target: dns:///worker:50051",
                                   &processor->target);
        }
        if (key == "event_types") {
          *event_types_line = key_line;
          if (!value.IsSequence()) {
            return Error(value_line, child,
                         absl::StrCat("expected a list of event types, e.g. "
                                      "[\"order.created\"] or [\"*\"], got ",
                                      Describe(value)));
          }
          if (value.size() == 0) {
            return Error(value_line, child,
                         "must name at least one event type; leave it out to "
                         "handle every type (\"*\")");
          }
          processor->event_types.clear();
          std::set<std::string> seen;
          size_t i = 0;
          for (auto it = value.begin(); it != value.end(); ++it, ++i) {
            std::string type;
            const std::string item_path = Index(child, i);
            absl::Status s = GetNonEmptyString(
                *it, item_path, LineOf(*it, value_line), "order.created",
                &type);
            if (!s.ok()) return s;
            if (!seen.insert(type).second) {
              return Error(LineOf(*it, value_line), item_path,
                           absl::StrCat("event type \"", type,
                                        "\" is listed twice"));
            }
            processor->event_types.push_back(std::move(type));
          }
          return absl::OkStatus();
        }
        if (key == "streams") {
          return GetInt(value, child, value_line, 1, "streams: 2",
                        &processor->streams);
        }
        if (key == "max_in_flight") {
          return GetInt(value, child, value_line, 1, "max_in_flight: 256",
                        &processor->max_in_flight);
        }
        if (key == "max_batch") {
          return GetInt(value, child, value_line, 1, "max_batch: 64",
                        &processor->max_batch);
        }
        if (key == "max_batch_bytes") {
          absl::Status bytes_status =
              GetBytes(value, child, value_line, &processor->max_batch_bytes);
          if (!bytes_status.ok()) return bytes_status;
          if (processor->max_batch_bytes < 1024) {
            return Error(value_line, child,
                         "must be at least 1KiB, e.g. `max_batch_bytes: 3MiB`");
          }
          return absl::OkStatus();
        }
        if (key == "max_attempts") {
          return GetInt(value, child, value_line, 1, "max_attempts: 5",
                        &processor->max_attempts);
        }
        if (key == "retry_backoff") {
          return GetDuration(value, child, value_line, /*allow_zero=*/true,
                             "retry_backoff: 100ms", &processor->retry_backoff);
        }
        if (key == "retry_backoff_max") {
          return GetDuration(value, child, value_line, /*allow_zero=*/true,
                             "retry_backoff_max: 30s",
                             &processor->retry_backoff_max);
        }
        if (key == "retry_on_timeout") {
          return GetBool(value, child, value_line, "retry_on_timeout: false",
                         &processor->retry_on_timeout);
        }
        if (key == "on_failure") {
          processor->has_on_failure = true;
          return GetFailurePolicy(value, child, value_line,
                                  &processor->on_failure);
        }
        if (key == "dead_letter_topic") {
          return GetNonEmptyString(value, child, value_line,
                                   "dead_letter_topic: orders-dlq",
                                   &processor->dead_letter_topic);
        }
        if (key == "tls") {
          return GetTls(value, child, value_line, /*server=*/false,
                        &processor->tls);
        }
        if (key == "keepalive") {
          return GetKeepalive(value, child, value_line, &processor->keepalive);
        }
        return GetDuration(value, child, value_line, /*allow_zero=*/false,
                           "timeout: 30s", &processor->timeout);
      });
  if (!status.ok()) return status;
  if (!has_name) {
    return Error(line, Child(path, "name"),
                 "missing; every processor needs a unique name, e.g. "
                 "`name: default`");
  }
  if (!has_target) {
    return Error(line, Child(path, "target"),
                 "missing; set the worker's gRPC address, e.g. "
                 "`target: dns:///worker:50051` or "
                 "`target: ipv4:127.0.0.1:50051`");
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseProcessors(const YAML::Node& node, int line,
                                     Config* config) {
  const std::string path = "processors";
  if (node.IsNull() || (node.IsSequence() && node.size() == 0)) {
    return Error(line, path,
                 "needs at least one processor, e.g.\n  processors:\n"
                 "    - name: default\n      target: ipv4:127.0.0.1:50051");
  }
  if (!node.IsSequence()) {
    return Error(line, path,
                 absl::StrCat("expected a list of processors (`- name: ...`), "
                              "got ",
                              Describe(node)));
  }
  if (node.size() > kMaxProcessors) {
    return Error(line, path, absl::StrCat(node.size(), " processors; at most ",
                                          kMaxProcessors, " are supported"));
  }
  std::map<std::string, size_t> names;
  // Event type -> index of the processor that claimed it.
  std::map<std::string, size_t> claims;
  size_t i = 0;
  for (auto it = node.begin(); it != node.end(); ++it, ++i) {
    const std::string item_path = Index(path, i);
    const int item_line = LineOf(*it, line);
    ProcessorConfig processor;
    int name_line = item_line;
    int event_types_line = item_line;
    absl::Status status = ParseProcessor(*it, item_path, item_line, &processor,
                                         &name_line, &event_types_line);
    if (!status.ok()) return status;
    auto [prev, inserted] = names.emplace(processor.name, i);
    if (!inserted) {
      return Error(name_line, Child(item_path, "name"),
                   absl::StrCat("processor name \"", processor.name,
                                "\" is already used by processors[",
                                prev->second, "]; names must be unique"));
    }
    for (const std::string& type : processor.event_types) {
      auto [owner, claimed] = claims.emplace(type, i);
      if (claimed) continue;
      const std::string& other = config->processors[owner->second].name;
      if (type == "*") {
        return Error(event_types_line, Child(item_path, "event_types"),
                     absl::StrCat("\"*\" (every remaining type) is already "
                                  "claimed by processor \"",
                                  other,
                                  "\"; at most one processor may use \"*\", "
                                  "list explicit event types here instead"));
      }
      return Error(event_types_line, Child(item_path, "event_types"),
                   absl::StrCat("event type \"", type,
                                "\" is already claimed by processor \"", other,
                                "\"; each event type goes to one processor"));
    }
    config->processors.push_back(std::move(processor));
  }
  return absl::OkStatus();
}

absl::Status Parser::Parse(const YAML::Node& root, Config* config) {
  if (root.IsNull() || !root.IsDefined()) {
    return Error(1, "",
                 "the configuration is empty; it needs at least `topics` and "
                 "`processors`");
  }
  const int root_line = LineOf(root, 1);
  if (!root.IsMap()) {
    return Error(root_line, "",
                 absl::StrCat("expected a map of settings at the top level "
                              "(kafka, topics, processors, ...), got ",
                              Describe(root)));
  }
  bool has_topics = false;
  bool has_processors = false;
  bool has_default_policy = false;
  bool has_metrics_listen = false;
  bool has_max_delayed_events = false;
  bool has_lane_count = false;
  int failures_line = root_line;
  absl::Status status = ForEachField(
      root, "", root_line,
      {"kafka", "topics", "processors", "lanes", "budgets", "commit",
       "shutdown", "log", "server", "embedded", "failures", "control",
       "priorities"},
      [&](const std::string& key, const std::string& path, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        if (key == "kafka") return ParseKafka(value, value_line, config);
        if (key == "topics") {
          has_topics = true;
          return ParseTopics(value, value_line, config);
        }
        if (key == "processors") {
          has_processors = true;
          return ParseProcessors(value, value_line, config);
        }
        if (key == "lanes") {
          return ForEachField(
              value, path, value_line, {"count", "capacity"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "count") {
                  if (v.IsScalar() && v.Scalar() == "auto") return absl::OkStatus();
                  has_lane_count = true;
                  return GetInt(v, p, l, 1, "count: 2048 (or auto)",
                                &config->lane_count);
                }
                return GetInt(v, p, l, 1, "capacity: 4096",
                              &config->lane_capacity);
              });
        }
        if (key == "priorities") {
          return ParsePriorities(value, path, value_line, config);
        }
        if (key == "budgets") {
          return ForEachField(
              value, path, value_line,
              {"max_buffered_events", "max_buffered_bytes", "resume_fraction",
               "max_delayed_events"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "max_delayed_events") {
                  has_max_delayed_events = true;
                  return GetInt64(v, p, l, 1,
                                  std::numeric_limits<int64_t>::max(),
                                  "max_delayed_events: 10000",
                                  &config->max_delayed_events);
                }
                if (k == "max_buffered_events") {
                  return GetInt64(v, p, l, 1,
                                  std::numeric_limits<int64_t>::max(),
                                  "max_buffered_events: 100000",
                                  &config->max_buffered_events);
                }
                if (k == "max_buffered_bytes") {
                  return GetBytes(v, p, l, &config->max_buffered_bytes);
                }
                return GetFraction(v, p, l, &config->resume_fraction);
              });
        }
        if (key == "commit") {
          return ForEachField(
              value, path, value_line, {"interval"},
              [&](const std::string&, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                return GetDuration(v, p, l, /*allow_zero=*/false,
                                   "interval: 1s", &config->commit_interval);
              });
        }
        if (key == "shutdown") {
          return ForEachField(
              value, path, value_line, {"grace"},
              [&](const std::string&, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                return GetDuration(v, p, l, /*allow_zero=*/true, "grace: 20s",
                                   &config->shutdown_grace);
              });
        }
        if (key == "log") {
          return ForEachField(
              value, path, value_line, {"progress_interval", "format"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "format") {
                  std::string format;
                  absl::Status got = GetScalar(v, p, l, "format: json", &format);
                  if (!got.ok()) return got;
                  if (format != "text" && format != "json") {
                    return Error(l, p,
                                 absl::StrCat("expected text or json, got \"",
                                              absl::CEscape(format), "\""));
                  }
                  config->log_format = format;
                  return absl::OkStatus();
                }
                return GetDuration(v, p, l, /*allow_zero=*/true,
                                   "progress_interval: 5s",
                                   &config->progress_interval);
              });
        }
        if (key == "failures") {
          failures_line = value_line;
          return ForEachField(
              value, path, value_line,
              {"on_failure", "dead_letter_topic", "max_event_bytes"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "on_failure") {
                  has_default_policy = true;
                  return GetFailurePolicy(v, p, l, &config->on_failure);
                }
                if (k == "dead_letter_topic") {
                  return GetNonEmptyString(v, p, l,
                                           "dead_letter_topic: ferry-dlq",
                                           &config->dead_letter_topic);
                }
                absl::Status bytes =
                    GetBytes(v, p, l, &config->max_event_bytes);
                if (!bytes.ok()) return bytes;
                if (config->max_event_bytes < 1024) {
                  return Error(l, p, "must be at least 1KiB, e.g. `3MiB`");
                }
                return absl::OkStatus();
              });
        }
        if (key == "control") {
          return ForEachField(
              value, path, value_line, {"token_file", "topic", "catch_up_timeout"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "token_file") {
                  Locate(p, l);
                  return GetNonEmptyString(v, p, l,
                                           "token_file: /etc/ferry/token/token",
                                           &config->control_token_file);
                }
                if (k == "catch_up_timeout") {
                  return GetDuration(v, p, l, /*allow_zero=*/true,
                                     "catch_up_timeout: 10s",
                                     &config->control_catch_up_timeout);
                }
                absl::Status got = GetNonEmptyString(
                    v, p, l, "topic: ferry.control.orders", &config->control_topic);
                if (!got.ok()) return got;
                if (config->control_topic.size() > 249 ||
                    config->control_topic.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789._-") != std::string::npos) {
                  return Error(l, p,
                               "not a valid Kafka topic name (use letters, "
                               "digits, '.', '_' and '-', at most 249)");
                }
                return absl::OkStatus();
              });
        }
        if (key == "server") {
          return ForEachField(
              value, path, value_line, {"listen", "metrics_listen", "health_listen", "tls"},
              [&](const std::string& k, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (k == "health_listen") {
                  return GetListenAddress(v, p, l, &config->health_listen_address);
                }
                if (k == "tls") {
                  return GetTls(v, p, l, /*server=*/true, &config->server_tls);
                }
                if (k == "metrics_listen") {
                  has_metrics_listen = true;
                  if (v.IsScalar() && v.Scalar() == "off") {
                    config->metrics_listen_address.clear();
                    return absl::OkStatus();
                  }
                  return GetListenAddress(v, p, l,
                                          &config->metrics_listen_address);
                }
                return GetListenAddress(v, p, l, &config->listen_address);
              });
        }
        // embedded
        return ForEachField(
            value, path, value_line, {"partitions", "bootstrap_file"},
            [&](const std::string& k, const std::string& p, int,
                const YAML::Node& v, int l) -> absl::Status {
              if (k == "partitions") {
                return GetInt(v, p, l, 1, "partitions: 8",
                              &config->embedded_partitions);
              }
              return GetNonEmptyString(v, p, l,
                                       "bootstrap_file: /tmp/ferry-bootstrap",
                                       &config->embedded_bootstrap_file);
            });
      });
  if (!status.ok()) return status;
  if (!has_topics) {
    return Error(root_line, "topics",
                 "missing; list the topics to consume, e.g.\n  topics:\n"
                 "    - name: orders");
  }
  if (!has_processors) {
    return Error(root_line, "processors",
                 "missing; list at least one worker, e.g.\n  processors:\n"
                 "    - name: default\n      target: ipv4:127.0.0.1:50051");
  }
  if (config->kafka.count("group.id") == 0) config->kafka["group.id"] = "ferry";
  if (config->control_topic.empty()) {
    // Topic names allow [a-zA-Z0-9._-]; anything else in the group id
    // becomes '_'.
    std::string group = config->kafka["group.id"];
    for (char& c : group) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
          c != '_' && c != '-') {
        c = '_';
      }
    }
    config->control_topic = absl::StrCat("ferry.control.", group).substr(0, 249);
  }
  for (const TopicConfig& topic : config->topics) {
    if (topic.name == config->control_topic) {
      return Error(root_line, "control.topic",
                   absl::StrCat("\"", topic.name,
                                "\" is also listed under topics; the control "
                                "topic must be a topic of its own"));
    }
  }
  if (!has_metrics_listen) {
    config->metrics_listen_address =
        DefaultMetricsListenAddress(config->listen_address);
  }
  if (!has_default_policy) {
    config->on_failure = config->dead_letter_topic.empty()
                             ? FailurePolicy::kSkip
                             : FailurePolicy::kDeadLetter;
  }
  if (config->on_failure == FailurePolicy::kDeadLetter &&
      config->dead_letter_topic.empty()) {
    return Error(failures_line, "failures.dead_letter_topic",
                 "on_failure is dlq but no dead_letter_topic is set; set "
                 "`dead_letter_topic: ferry-dlq` or use on_failure: skip");
  }
  for (size_t i = 0; i < config->processors.size(); ++i) {
    const ProcessorConfig& processor = config->processors[i];
    if (config->PolicyFor(static_cast<int>(i)) == FailurePolicy::kDeadLetter &&
        config->DeadLetterTopicFor(static_cast<int>(i)).empty()) {
      return Error(root_line, Child(Index("processors", i), "dead_letter_topic"),
                   absl::StrCat("processor \"", processor.name,
                                "\" fails to a dead-letter topic but none is "
                                "set; set dead_letter_topic here or under "
                                "failures"));
    }
    if (processor.retry_backoff_max < processor.retry_backoff) {
      return Error(root_line,
                   Child(Index("processors", i), "retry_backoff_max"),
                   "must not be smaller than retry_backoff");
    }
  }
  if (!has_lane_count) config->lane_count = AutoLaneCount(config->processors);
  return CheckScheduling(root_line, has_max_delayed_events, config);
}

absl::Status Parser::ParsePriorities(const YAML::Node& node,
                                     const std::string& path, int line,
                                     Config* config) {
  priorities_line_ = line;
  bool has_classes = false;
  absl::Status status = ForEachField(
      node, path, line, {"classes", "default", "event_types"},
      [&](const std::string& key, const std::string& child, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        if (key == "classes") {
          has_classes = true;
          if (value.IsNull() || !value.IsMap() || value.size() == 0) {
            return Error(value_line, child,
                         absl::StrCat("expected a map of class name to "
                                      "weight, e.g. `classes: {high: 6, "
                                      "medium: 3, low: 1}`, got ",
                                      Describe(value)));
          }
          return ForEachField(
              value, child, value_line, {},
              [&](const std::string& name, const std::string& p, int,
                  const YAML::Node& v, int l) -> absl::Status {
                if (absl::StripAsciiWhitespace(name).empty()) {
                  return Error(l, p, "a class name must not be empty");
                }
                int64_t weight = 0;
                absl::Status got = GetInt64(v, p, l, 1, 1000,
                                            absl::StrCat(name, ": 3"), &weight);
                if (!got.ok()) return got;
                config->priority_classes.push_back(
                    PriorityClass{name, static_cast<int>(weight)});
                return absl::OkStatus();
              });
        }
        if (key == "default") {
          default_priority_line_ = value_line;
          return GetNonEmptyString(value, child, value_line, "default: low",
                                   &config->default_priority);
        }
        // event_types
        if (value.IsNull() || !value.IsMap()) {
          return Error(value_line, child,
                       absl::StrCat("expected a map of event type to class, "
                                    "e.g. `event_types: {payment.refund: "
                                    "high}`, got ",
                                    Describe(value)));
        }
        return ForEachField(
            value, child, value_line, {},
            [&](const std::string& type, const std::string& p, int,
                const YAML::Node& v, int l) -> absl::Status {
              if (absl::StripAsciiWhitespace(type).empty()) {
                return Error(l, p, "an event type must not be empty");
              }
              priority_by_type_lines_[type] = l;
              return GetNonEmptyString(v, p, l, absl::StrCat(type, ": high"),
                                       &config->priority_by_type[type]);
            });
      });
  if (!status.ok()) return status;
  if (!has_classes) {
    return Error(line, Child(path, "classes"),
                 "missing; name the classes and their weights, e.g. "
                 "`classes: {high: 6, medium: 3, low: 1}`");
  }
  return absl::OkStatus();
}

absl::Status Parser::CheckScheduling(int root_line, bool has_max_delayed_events,
                                     Config* config) const {
  if (!has_max_delayed_events) {
    config->max_delayed_events = config->max_buffered_events;
  }
  std::set<std::string> classes;
  for (const PriorityClass& c : config->priority_classes) classes.insert(c.name);
  const std::string known =
      absl::StrJoin(config->priority_classes, ", ",
                    [](std::string* out, const PriorityClass& c) {
                      absl::StrAppend(out, c.name);
                    });
  auto unknown_class = [&](int line, const std::string& path,
                           const std::string& name) {
    if (classes.empty()) {
      return Error(line, path,
                   absl::StrCat("names priority class \"", name,
                                "\" but no priorities are configured; add "
                                "e.g. `priorities: {classes: {", name,
                                ": 6, low: 1}, default: low}`"));
    }
    return Error(line, path,
                 absl::StrCat("unknown priority class \"", name,
                              "\" (classes: ", known, ")"));
  };
  if (!config->default_priority.empty() &&
      classes.count(config->default_priority) == 0) {
    return unknown_class(default_priority_line_, "priorities.default",
                         config->default_priority);
  }
  for (const auto& [type, name] : config->priority_by_type) {
    if (classes.count(name) > 0) continue;
    auto line = priority_by_type_lines_.find(type);
    return unknown_class(
        line != priority_by_type_lines_.end() ? line->second : priorities_line_,
        absl::StrCat("priorities.event_types.", type), name);
  }
  for (size_t i = 0; i < config->topics.size(); ++i) {
    const TopicConfig& topic = config->topics[i];
    const TopicLines lines =
        i < topic_lines_.size() ? topic_lines_[i] : TopicLines{root_line, root_line, 0, 0};
    const std::string path = Index("topics", i);
    if (!topic.priority.empty() && classes.count(topic.priority) == 0) {
      return unknown_class(lines.priority, Child(path, "priority"),
                           topic.priority);
    }
    if (topic.priority.empty() && !classes.empty() &&
        config->default_priority.empty()) {
      return Error(lines.item, Child(path, "priority"),
                   absl::StrCat("missing; topic \"", topic.name,
                                "\" needs a priority class (", known,
                                "), or set priorities.default for topics "
                                "without one"));
    }
    // Routing: a type known now must have a processor now.
    std::string type;
    if (topic.type.kind == FieldSource::Kind::kConstant) {
      type = topic.type.argument;
    } else if (topic.type.kind == FieldSource::Kind::kTopic) {
      type = topic.name;
    } else {
      continue;
    }
    bool routed = false;
    for (const ProcessorConfig& processor : config->processors) {
      for (const std::string& handled : processor.event_types) {
        routed = routed || handled == "*" || handled == type;
      }
    }
    if (!routed) {
      return Error(lines.type > 0 ? lines.type : lines.name, Child(path, "type"),
                   absl::StrCat("every record of topic \"", topic.name,
                                "\" has event type \"", type,
                                "\", which no processor handles; add it to a "
                                "processor's event_types or add a processor "
                                "with event_types: [\"*\"]"));
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::GetKeepalive(const YAML::Node& node,
                                  const std::string& path, int line,
                                  KeepaliveConfig* out) const {
  return ForEachField(
      node, path, line, {"interval", "timeout"},
      [&](const std::string& key, const std::string& child, int,
          const YAML::Node& value, int value_line) -> absl::Status {
        const bool interval = key == "interval";
        absl::Duration* field = interval ? &out->interval : &out->timeout;
        absl::Status status =
            GetDuration(value, child, value_line, /*allow_zero=*/false,
                        interval ? "interval: 5s" : "timeout: 5s", field);
        if (!status.ok()) return status;
        // Below these, workers' gRPC servers (ferry's SDKs permit 1s) answer
        // the pings with GOAWAY too_many_pings.
        const absl::Duration minimum =
            interval ? kMinKeepaliveInterval : kMinKeepaliveTimeout;
        if (*field < minimum) {
          return Error(value_line, child,
                       absl::StrCat("must be at least ",
                                    absl::FormatDuration(minimum)));
        }
        return absl::OkStatus();
      });
}

absl::Status Parser::GetTls(const YAML::Node& node, const std::string& path,
                            int line, bool server, TlsFiles* out) const {
  std::vector<std::string> known = {"cert_file", "key_file"};
  known.push_back(server ? "client_ca_file" : "ca_file");
  if (!server) known.push_back("server_name");
  out->enabled = true;
  absl::Status status = ForEachField(
      node, path, line, known,
      [&](const std::string& k, const std::string& p, int,
          const YAML::Node& v, int l) -> absl::Status {
        std::string* field = k == "cert_file"   ? &out->cert_file
                             : k == "key_file"  ? &out->key_file
                             : k == "server_name" ? &out->server_name
                                                  : &out->ca_file;
        if (k != "server_name") Locate(p, l);
        return GetNonEmptyString(v, p, l, absl::StrCat(k, ": /etc/ferry/tls/", k == "key_file" ? "tls.key" : k == "cert_file" ? "tls.crt" : "ca.crt"),
                                 field);
      });
  if (!status.ok()) return status;
  if (out->cert_file.empty() != out->key_file.empty()) {
    return Error(line, path,
                 "cert_file and key_file go together; set both (PEM files)");
  }
  if (server && out->cert_file.empty()) {
    return Error(line, Child(path, "cert_file"),
                 "missing; a TLS server needs `cert_file` and `key_file` "
                 "(PEM); remove `tls:` to serve plaintext");
  }
  return absl::OkStatus();
}

}  // namespace

int AutoLaneCount(const std::vector<ProcessorConfig>& processors) {
  constexpr int64_t kMinimum = 64;
  constexpr int64_t kMaximum = 16384;
  int64_t credit = 0;
  for (const ProcessorConfig& processor : processors) {
    credit += static_cast<int64_t>(processor.streams) * processor.max_in_flight;
  }
  int64_t lanes = kMinimum;
  while (lanes < 4 * credit && lanes < kMaximum) lanes *= 2;
  return static_cast<int>(lanes);
}

absl::StatusOr<Config> ParseConfig(absl::string_view yaml_text,
                                   absl::string_view source_name) {
  Parser parser(source_name);
  if (yaml_text.size() > static_cast<size_t>(kMaxConfigFileBytes)) {
    // The line where the limit is crossed, so the operator sees where the
    // file went wrong (a generated list, a pasted blob).
    const absl::string_view kept = yaml_text.substr(0, kMaxConfigFileBytes);
    return parser.Error(1 + static_cast<int>(std::count(kept.begin(), kept.end(), '\n')), "",
                        absl::StrCat("the configuration is over the limit of ",
                                     kMaxConfigFileBytes, " bytes (1 MiB) here; "
                                     "a ferry config is a few kilobytes"));
  }
  try {
    const std::string text(yaml_text);
    const YamlScan scan = ScanYaml(text, kMaxConfigValues);
    if (scan.line_over_limit > 0) {
      return parser.Error(scan.line_over_limit, "",
                          absl::StrCat("more than ", kMaxConfigValues,
                                       " YAML values; a ferry config has hundreds"));
    }
    if (scan.documents > 1) {
      return parser.Error(scan.second_document_line, "",
                          "expected one YAML document, found more; remove the extra `---` "
                          "separators");
    }
    // The first (only) document; never YAML::LoadAll (see core/config/yaml_limits.h).
    const YAML::Node document = scan.documents == 0 ? YAML::Node() : YAML::Load(text);
    Config config;
    absl::Status status =
        parser.Parse(document, &config);
    if (!status.ok()) return status;
    config.locations = parser.Locations();
    return config;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return parser.Error(line, "",
                        absl::StrCat("invalid YAML: ",
                                     e.msg.empty() ? e.what() : e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": cannot parse configuration: ", e.what()));
  }
}

}  // namespace ferry
