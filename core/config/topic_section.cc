#include "core/config/topic_section.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry {

using config_yaml::Child;
using config_yaml::Describe;
using config_yaml::EnumName;
using config_yaml::Index;
using config_yaml::LineOf;
using config_yaml::YamlReader;

namespace {

// A JSON Pointer after `json:` (RFC 6901): starts with '/', '~' only as ~0 or ~1.
absl::Status CheckJsonPointer(const YamlReader& reader, absl::string_view s,
                              const std::string& path, int line) {
  if (s.empty() || s[0] != '/') {
    return reader.Error(line, path,
                        absl::StrCat("invalid JSON Pointer \"", absl::CEscape(s),
                                     "\": it must start with '/', e.g. json:/user/id"));
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '~' && (i + 1 == s.size() || (s[i + 1] != '0' && s[i + 1] != '1'))) {
      return reader.Error(line, path,
                          absl::StrCat("invalid JSON Pointer \"", absl::CEscape(s),
                                       "\": '~' must be followed by 0 (for '~') or "
                                       "1 (for '/')"));
    }
  }
  return absl::OkStatus();
}

// record_key, topic, header:NAME, json:/pointer or const:VALUE.
absl::Status ReadFieldSource(const YamlReader& reader, const YAML::Node& node,
                             const std::string& path, int line, FieldSource* out) {
  constexpr absl::string_view kHelp =
      "use record_key, header:NAME, json:/json/pointer, topic or const:VALUE";
  std::string text;
  absl::Status status = reader.GetScalar(node, path, line, "header:event-type", &text);
  if (!status.ok()) return status;
  absl::string_view s = text;
  if (s == "record_key") {
    *out = FieldSource{FieldSource::Kind::kRecordKey, ""};
  } else if (s == "topic") {
    *out = FieldSource{FieldSource::Kind::kTopic, ""};
  } else if (absl::ConsumePrefix(&s, "header:")) {
    if (s.empty()) {
      return reader.Error(line, path, "header: needs a header name, e.g. header:event-type");
    }
    *out = FieldSource{FieldSource::Kind::kHeader, std::string(s)};
  } else if (absl::ConsumePrefix(&s, "json:")) {
    status = CheckJsonPointer(reader, s, path, line);
    if (!status.ok()) return status;
    *out = FieldSource{FieldSource::Kind::kJson, std::string(s)};
  } else if (absl::ConsumePrefix(&s, "const:")) {
    if (s.empty()) return reader.Error(line, path, "const: needs a value, e.g. const:order");
    *out = FieldSource{FieldSource::Kind::kConstant, std::string(s)};
  } else {
    return reader.Error(line, path,
                        absl::StrCat("unknown source \"", absl::CEscape(text), "\" (",
                                     kHelp, ")"));
  }
  return absl::OkStatus();
}

// topics[i].delays: {event type: duration}.
absl::Status ReadDelays(const YamlReader& reader, const YAML::Node& value,
                        const std::string& path, int line, TopicConfig* topic) {
  return reader.ForEachNamedEntry(
      value, path, line, /*allow_empty=*/true,
      "event type to delay, e.g. `delays: {order.reminder: 1h}`", "an event type",
      [&](const std::string& type, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        absl::Duration delay;
        absl::Status got = reader.GetDuration(v, p, l, /*allow_zero=*/true,
                                              absl::StrCat(type, ": 1h"), &delay);
        if (!got.ok()) return got;
        topic->delays[type] = delay;
        return absl::OkStatus();
      });
}

absl::Status ReadTopicField(const YamlReader& reader, const std::string& key,
                            const std::string& child, const YAML::Node& value,
                            int value_line, TopicConfig* topic, TopicLines* lines) {
  if (key == "name") {
    lines->name = value_line;
    return reader.GetNonEmptyString(value, child, value_line, "name: orders", &topic->name);
  }
  if (key == "ordering") {
    return reader.GetEnum<Ordering>(value, child, value_line, "ordering",
                                    {{"key", Ordering::kKey},
                                     {"partition", Ordering::kPartition},
                                     {"unordered", Ordering::kUnordered}},
                                    &topic->ordering);
  }
  if (key == "key") return ReadFieldSource(reader, value, child, value_line, &topic->key);
  if (key == "delay") {
    return reader.GetDuration(value, child, value_line, /*allow_zero=*/true, "delay: 30s",
                              &topic->delay);
  }
  if (key == "delays") return ReadDelays(reader, value, child, value_line, topic);
  if (key == "priority") {
    lines->priority = value_line;
    return reader.GetNonEmptyString(value, child, value_line, "priority: high",
                                    &topic->priority);
  }
  lines->type = value_line;
  return ReadFieldSource(reader, value, child, value_line, &topic->type);
}

absl::Status ParseTopic(const YamlReader& reader, const YAML::Node& node,
                        const std::string& path, int line, TopicConfig* topic,
                        TopicLines* lines) {
  if (!node.IsMap()) {
    return reader.Error(line, path,
                        absl::StrCat("expected a map with at least `name`, e.g. "
                                     "`- name: orders`, got ",
                                     Describe(node)));
  }
  bool has_name = false;
  lines->item = line;
  absl::Status status = reader.ForEachField(
      node, path, line, {"name", "ordering", "key", "type", "delay", "delays", "priority"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& value,
          int value_line) -> absl::Status {
        has_name = has_name || key == "name";
        return ReadTopicField(reader, key, child, value, value_line, topic, lines);
      });
  if (!status.ok()) return status;
  if (!has_name) {
    return reader.Error(line, Child(path, "name"),
                        "missing; every topic needs a name, e.g. `- name: orders`");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseTopicsSection(YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes* notes) {
  notes->has_topics = true;
  if (node.IsNull() || (node.IsSequence() && node.size() == 0)) {
    return reader.Error(line, path,
                        "needs at least one topic, e.g.\n  topics:\n    - name: orders");
  }
  if (!node.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected a list of topics (`- name: orders`), got ",
                                     Describe(node)));
  }
  if (node.size() > kMaxTopics) {
    return reader.Error(line, path, absl::StrCat(node.size(), " topics; at most ",
                                                 kMaxTopics, " are supported"));
  }
  std::map<std::string, size_t> seen;
  size_t i = 0;
  for (auto it = node.begin(); it != node.end(); ++it, ++i) {
    const std::string item_path = Index(path, i);
    const int item_line = LineOf(*it, line);
    TopicConfig topic;
    TopicLines lines;
    lines.name = item_line;
    absl::Status status = ParseTopic(reader, *it, item_path, item_line, &topic, &lines);
    notes->topic_lines.push_back(lines);
    if (!status.ok()) return status;
    auto [prev, inserted] = seen.emplace(topic.name, i);
    if (!inserted) {
      return reader.Error(lines.name, Child(item_path, "name"),
                          absl::StrCat("topic \"", topic.name,
                                       "\" is listed twice (first as topics[", prev->second,
                                       "]); merge the two entries"));
    }
    config->topics.push_back(std::move(topic));
  }
  return absl::OkStatus();
}

namespace {

// priorities.classes: {name: weight 1..1000}, non-empty.
absl::Status ReadClasses(const YamlReader& reader, const YAML::Node& value,
                         const std::string& path, int line, Config* config) {
  return reader.ForEachNamedEntry(
      value, path, line, /*allow_empty=*/false,
      "class name to weight, e.g. `classes: {high: 6, medium: 3, low: 1}`",
      "a class name",
      [&](const std::string& name, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        int64_t weight = 0;
        absl::Status got = reader.GetInt64(v, p, l, 1, 1000, absl::StrCat(name, ": 3"), &weight);
        if (!got.ok()) return got;
        config->priority_classes.push_back(PriorityClass{name, static_cast<int>(weight)});
        return absl::OkStatus();
      });
}

// priorities.event_types: {event type: class}.
absl::Status ReadClassByType(const YamlReader& reader, const YAML::Node& value,
                             const std::string& path, int line, Config* config,
                             ParseNotes* notes) {
  return reader.ForEachNamedEntry(
      value, path, line, /*allow_empty=*/true,
      "event type to class, e.g. `event_types: {payment.refund: high}`", "an event type",
      [&](const std::string& type, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        notes->priority_by_type_lines[type] = l;
        return reader.GetNonEmptyString(v, p, l, absl::StrCat(type, ": high"),
                                        &config->priority_by_type[type]);
      });
}

}  // namespace

absl::Status ParsePrioritiesSection(YamlReader& reader, const YAML::Node& node,
                                    const std::string& path, int line, Config* config,
                                    ParseNotes* notes) {
  notes->priorities_line = line;
  bool has_classes = false;
  absl::Status status = reader.ForEachField(
      node, path, line, {"classes", "default", "event_types"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& value,
          int value_line) -> absl::Status {
        if (key == "classes") {
          has_classes = true;
          return ReadClasses(reader, value, child, value_line, config);
        }
        if (key == "default") {
          notes->default_priority_line = value_line;
          return reader.GetNonEmptyString(value, child, value_line, "default: low",
                                          &config->default_priority);
        }
        return ReadClassByType(reader, value, child, value_line, config, notes);
      });
  if (!status.ok()) return status;
  if (!has_classes) {
    return reader.Error(line, Child(path, "classes"),
                        "missing; name the classes and their weights, e.g. "
                        "`classes: {high: 6, medium: 3, low: 1}`");
  }
  return absl::OkStatus();
}

}  // namespace ferry
