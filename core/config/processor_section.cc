#include "core/config/processor_section.h"

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/config/channel_settings.h"
#include "core/config/protection_section.h"

namespace ferry {

using config_yaml::Child;
using config_yaml::Describe;
using config_yaml::Index;
using config_yaml::LineOf;
using config_yaml::YamlReader;

namespace {

// Where a processor's keys were written, for errors found after its entry.
struct ProcessorLines {
  int name = 0;
  int event_types = 0;
  ConcurrencyLines concurrency;
};

// The whole-number settings: at least 1.
struct IntSetting {
  absl::string_view key;
  absl::string_view example;
  int ProcessorConfig::*field;
};
constexpr IntSetting kIntSettings[] = {
    {"streams", "streams: 2", &ProcessorConfig::streams},
    {"max_in_flight", "max_in_flight: 256", &ProcessorConfig::max_in_flight},
    {"max_batch", "max_batch: 64", &ProcessorConfig::max_batch},
    {"max_attempts", "max_attempts: 5", &ProcessorConfig::max_attempts},
};

struct DurationSetting {
  absl::string_view key;
  bool allow_zero;
  absl::string_view example;
  absl::Duration ProcessorConfig::*field;
};
constexpr DurationSetting kDurationSettings[] = {
    {"timeout", false, "timeout: 30s", &ProcessorConfig::timeout},
    {"retry_backoff", true, "retry_backoff: 100ms", &ProcessorConfig::retry_backoff},
    {"retry_backoff_max", true, "retry_backoff_max: 30s", &ProcessorConfig::retry_backoff_max},
};

// event_types: a non-empty list of distinct, non-empty types.
absl::Status ReadEventTypes(const YamlReader& reader, const YAML::Node& value,
                            const std::string& path, int line, ProcessorConfig* processor) {
  if (!value.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected a list of event types, e.g. "
                                     "[\"order.created\"] or [\"*\"], got ",
                                     Describe(value)));
  }
  if (value.size() == 0) {
    return reader.Error(line, path,
                        "must name at least one event type; leave it out to "
                        "handle every type (\"*\")");
  }
  processor->event_types.clear();
  std::set<std::string> seen;
  size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    std::string type;
    const std::string item_path = Index(path, i);
    const int item_line = LineOf(*it, line);
    absl::Status s = reader.GetNonEmptyString(*it, item_path, item_line, "order.created", &type);
    if (!s.ok()) return s;
    if (!seen.insert(type).second) {
      return reader.Error(item_line, item_path,
                          absl::StrCat("event type \"", type, "\" is listed twice"));
    }
    processor->event_types.push_back(std::move(type));
  }
  return absl::OkStatus();
}

// One `key: value` of a processor entry other than name and event_types.
absl::Status ReadProcessorSetting(YamlReader& reader, const std::string& key,
                                  const std::string& child, const YAML::Node& value,
                                  int value_line, ProcessorConfig* processor) {
  for (const IntSetting& s : kIntSettings) {
    if (key != s.key) continue;
    return reader.GetInt(value, child, value_line, 1, s.example, &(processor->*s.field));
  }
  for (const DurationSetting& s : kDurationSettings) {
    if (key != s.key) continue;
    return reader.GetDuration(value, child, value_line, s.allow_zero, s.example,
                              &(processor->*s.field));
  }
  if (key == "target") {
    return reader.GetNonEmptyString(value, child, value_line, "target: dns:///worker:50051",
                                    &processor->target);
  }
  if (key == "max_batch_bytes") {
    absl::Status status = reader.GetBytes(value, child, value_line, &processor->max_batch_bytes);
    if (!status.ok()) return status;
    if (processor->max_batch_bytes < 1024) {
      return reader.Error(value_line, child,
                          "must be at least 1KiB, e.g. `max_batch_bytes: 3MiB`");
    }
    return absl::OkStatus();
  }
  if (key == "retry_on_timeout") {
    return reader.GetBool(value, child, value_line, "retry_on_timeout: false",
                          &processor->retry_on_timeout);
  }
  if (key == "on_failure") {
    processor->has_on_failure = true;
    return reader.GetEnum<FailurePolicy>(value, child, value_line, "policy",
                                         {{"dlq", FailurePolicy::kDeadLetter},
                                          {"skip", FailurePolicy::kSkip},
                                          {"block", FailurePolicy::kBlock}},
                                         &processor->on_failure);
  }
  if (key == "dead_letter_topic") {
    return reader.GetNonEmptyString(value, child, value_line, "dead_letter_topic: orders-dlq",
                                    &processor->dead_letter_topic);
  }
  if (key == "tls") {
    return ReadTls(reader, value, child, value_line, /*server=*/false, &processor->tls);
  }
  return ReadKeepalive(reader, value, child, value_line, &processor->keepalive);
}

absl::Status ParseProcessor(YamlReader& reader, const YAML::Node& node,
                            const std::string& path, int line, ProcessorConfig* processor,
                            ProcessorLines* lines) {
  if (!node.IsMap()) {
    return reader.Error(line, path,
                        absl::StrCat("expected a map with at least `name` and `target`, got ",
                                     Describe(node)));
  }
  bool has_target = false;
  std::vector<std::string> known = {
      "name",          "target",           "event_types",       "streams",
      "max_in_flight", "max_batch",        "max_batch_bytes",   "timeout",
      "max_attempts",  "retry_backoff",    "retry_backoff_max", "retry_on_timeout",
      "on_failure",    "dead_letter_topic", "tls",              "keepalive"};
  for (absl::string_view key : kProtectionKeys) known.push_back(std::string(key));
  absl::Status status = reader.ForEachField(
      node, path, line, known,
      [&](const std::string& key, const std::string& child, int key_line,
          const YAML::Node& value, int value_line) -> absl::Status {
        if (key == "name") {
          lines->name = value_line;
          return reader.GetNonEmptyString(value, child, value_line, "name: default",
                                          &processor->name);
        }
        if (key == "event_types") {
          lines->event_types = key_line;
          return ReadEventTypes(reader, value, child, value_line, processor);
        }
        if (IsProtectionKey(key)) {
          return ReadProtectionSetting(reader, key, child, value, value_line, processor,
                                       &lines->concurrency);
        }
        has_target = has_target || key == "target";
        return ReadProcessorSetting(reader, key, child, value, value_line, processor);
      });
  if (!status.ok()) return status;
  if (lines->name == 0) {
    return reader.Error(line, Child(path, "name"),
                        "missing; every processor needs a unique name, e.g. `name: default`");
  }
  if (!has_target) {
    return reader.Error(line, Child(path, "target"),
                        "missing; set the worker's gRPC address, e.g. "
                        "`target: dns:///worker:50051` or "
                        "`target: ipv4:127.0.0.1:50051`");
  }
  return absl::OkStatus();
}

// Each event type goes to one processor, "*" (every remaining type) to at
// most one. `claims`: event type -> index of the processor that claimed it.
absl::Status ClaimEventTypes(const YamlReader& reader, const Config& config,
                             const ProcessorConfig& processor, size_t index,
                             const std::string& path, int line,
                             std::map<std::string, size_t>* claims) {
  for (const std::string& type : processor.event_types) {
    auto [owner, claimed] = claims->emplace(type, index);
    if (claimed) continue;
    const std::string& other = config.processors[owner->second].name;
    if (type == "*") {
      return reader.Error(line, Child(path, "event_types"),
                          absl::StrCat("\"*\" (every remaining type) is already "
                                       "claimed by processor \"",
                                       other,
                                       "\"; at most one processor may use \"*\", "
                                       "list explicit event types here instead"));
    }
    return reader.Error(line, Child(path, "event_types"),
                        absl::StrCat("event type \"", type,
                                     "\" is already claimed by processor \"", other,
                                     "\"; each event type goes to one processor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseProcessorsSection(YamlReader& reader, const YAML::Node& node,
                                    const std::string& path, int line, Config* config,
                                    ParseNotes* notes) {
  notes->has_processors = true;
  if (node.IsNull() || (node.IsSequence() && node.size() == 0)) {
    return reader.Error(line, path,
                        "needs at least one processor, e.g.\n  processors:\n"
                        "    - name: default\n      target: ipv4:127.0.0.1:50051");
  }
  if (!node.IsSequence()) {
    return reader.Error(line, path,
                        absl::StrCat("expected a list of processors (`- name: ...`), got ",
                                     Describe(node)));
  }
  if (node.size() > kMaxProcessors) {
    return reader.Error(line, path, absl::StrCat(node.size(), " processors; at most ",
                                                 kMaxProcessors, " are supported"));
  }
  std::map<std::string, size_t> names;
  std::map<std::string, size_t> claims;
  size_t i = 0;
  for (auto it = node.begin(); it != node.end(); ++it, ++i) {
    const std::string item_path = Index(path, i);
    const int item_line = LineOf(*it, line);
    ProcessorConfig processor;
    ProcessorLines lines;
    absl::Status status = ParseProcessor(reader, *it, item_path, item_line, &processor, &lines);
    if (!status.ok()) return status;
    auto [prev, inserted] = names.emplace(processor.name, i);
    if (!inserted) {
      return reader.Error(lines.name, Child(item_path, "name"),
                          absl::StrCat("processor name \"", processor.name,
                                       "\" is already used by processors[", prev->second,
                                       "]; names must be unique"));
    }
    const int types_line = lines.event_types > 0 ? lines.event_types : item_line;
    status = ClaimEventTypes(reader, *config, processor, i, item_path, types_line, &claims);
    if (!status.ok()) return status;
    config->processors.push_back(std::move(processor));
    notes->concurrency_lines.push_back(lines.concurrency);
  }
  return absl::OkStatus();
}

}  // namespace ferry
