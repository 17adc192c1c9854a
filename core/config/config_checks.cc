#include "core/config/config_checks.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry {

using config_yaml::Child;
using config_yaml::Index;
using config_yaml::YamlReader;

namespace {

absl::Status CheckRequiredSections(const YamlReader& reader, const ParseNotes& notes) {
  if (!notes.has_topics) {
    return reader.Error(notes.root_line, "topics",
                        "missing; list the topics to consume, e.g.\n  topics:\n"
                        "    - name: orders");
  }
  if (!notes.has_processors) {
    return reader.Error(notes.root_line, "processors",
                        "missing; list at least one worker, e.g.\n  processors:\n"
                        "    - name: default\n      target: ipv4:127.0.0.1:50051");
  }
  return absl::OkStatus();
}

// group.id defaults to "ferry"; the control topic to ferry.control.<group.id>,
// and it must not be one of the consumed topics.
absl::Status ApplyControlTopic(const YamlReader& reader, const ParseNotes& notes,
                               Config* config) {
  if (config->kafka.count("group.id") == 0) config->kafka["group.id"] = "ferry";
  if (config->control_topic.empty()) {
    // Topic names allow [a-zA-Z0-9._-]; anything else in the group id
    // becomes '_'.
    std::string group = config->kafka["group.id"];
    for (char& c : group) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
          c != '-') {
        c = '_';
      }
    }
    config->control_topic = absl::StrCat("ferry.control.", group).substr(0, 249);
  }
  for (const TopicConfig& topic : config->topics) {
    if (topic.name == config->control_topic) {
      return reader.Error(notes.root_line, "control.topic",
                          absl::StrCat("\"", topic.name,
                                       "\" is also listed under topics; the control "
                                       "topic must be a topic of its own"));
    }
  }
  return absl::OkStatus();
}

// The default policy is dlq when a dead-letter topic is set, else skip; every
// processor that fails to a dead-letter topic must have one.
absl::Status ApplyFailurePolicy(const YamlReader& reader, const ParseNotes& notes,
                                Config* config) {
  if (!notes.has_default_policy) {
    config->on_failure = config->dead_letter_topic.empty() ? FailurePolicy::kSkip
                                                           : FailurePolicy::kDeadLetter;
  }
  if (config->on_failure == FailurePolicy::kDeadLetter && config->dead_letter_topic.empty()) {
    return reader.Error(notes.failures_line, "failures.dead_letter_topic",
                        "on_failure is dlq but no dead_letter_topic is set; set "
                        "`dead_letter_topic: ferry-dlq` or use on_failure: skip");
  }
  for (size_t i = 0; i < config->processors.size(); ++i) {
    const ProcessorConfig& processor = config->processors[i];
    const std::string path = Index("processors", i);
    if (config->PolicyFor(static_cast<int>(i)) == FailurePolicy::kDeadLetter &&
        config->DeadLetterTopicFor(static_cast<int>(i)).empty()) {
      return reader.Error(notes.root_line, Child(path, "dead_letter_topic"),
                          absl::StrCat("processor \"", processor.name,
                                       "\" fails to a dead-letter topic but none is "
                                       "set; set dead_letter_topic here or under "
                                       "failures"));
    }
    if (processor.retry_backoff_max < processor.retry_backoff) {
      return reader.Error(notes.root_line, Child(path, "retry_backoff_max"),
                          "must not be smaller than retry_backoff");
    }
  }
  return absl::OkStatus();
}

// An adaptive limit the processor's workers could never be given is a typo:
// ferry caps its limit at streams x max_in_flight (a limit written above it
// would silently mean the cap). Limits left at their defaults are capped
// without a word.
absl::Status CheckConcurrencyLimits(const YamlReader& reader, const ParseNotes& notes,
                                    const Config& config) {
  for (size_t i = 0; i < config.processors.size() && i < notes.concurrency_lines.size(); ++i) {
    const ProcessorConfig& processor = config.processors[i];
    if (processor.concurrency.mode != ConcurrencyMode::kAdaptive) continue;
    const int64_t bound = int64_t{processor.streams} * processor.max_in_flight;
    const ConcurrencyLines& lines = notes.concurrency_lines[i];
    const struct {
      const char* key;
      int line;
      int value;
    } limits[] = {{"initial_limit", lines.initial_limit, processor.concurrency.initial_limit},
                  {"min_limit", lines.min_limit, processor.concurrency.min_limit}};
    for (const auto& limit : limits) {
      if (limit.line == 0 || limit.value <= bound) continue;
      return reader.Error(
          limit.line, Child(Index("processors", i), absl::StrCat("concurrency.", limit.key)),
          absl::StrCat(limit.value, " is above streams x max_in_flight (", processor.streams,
                       " x ", processor.max_in_flight, " = ", bound,
                       "), the most processor \"", processor.name,
                       "\" can have in flight; lower it or raise streams or max_in_flight"));
    }
  }
  return absl::OkStatus();
}

// The priority classes that topics, priorities.default and
// priorities.event_types name, checked against priorities.classes.
class ClassNames {
 public:
  ClassNames(const YamlReader& reader, const Config& config) : reader_(reader) {
    for (const PriorityClass& c : config.priority_classes) names_.insert(c.name);
    known_ = absl::StrJoin(config.priority_classes, ", ",
                           [](std::string* out, const PriorityClass& c) {
                             absl::StrAppend(out, c.name);
                           });
  }

  bool empty() const { return names_.empty(); }
  bool Has(const std::string& name) const { return names_.count(name) > 0; }
  const std::string& known() const { return known_; }

  absl::Status Unknown(int line, const std::string& path, const std::string& name) const {
    if (names_.empty()) {
      return reader_.Error(line, path,
                           absl::StrCat("names priority class \"", name,
                                        "\" but no priorities are configured; add "
                                        "e.g. `priorities: {classes: {",
                                        name, ": 6, low: 1}, default: low}`"));
    }
    return reader_.Error(line, path,
                         absl::StrCat("unknown priority class \"", name, "\" (classes: ",
                                      known_, ")"));
  }

 private:
  const YamlReader& reader_;
  std::set<std::string> names_;
  std::string known_;
};

// A topic's class exists (or a default applies), and an event type known at
// startup (`type: const:X`, `type: topic`) has a processor.
absl::Status CheckTopic(const YamlReader& reader, const ClassNames& classes,
                        const Config& config, size_t i, const TopicLines& lines) {
  const TopicConfig& topic = config.topics[i];
  const std::string path = Index("topics", i);
  if (!topic.priority.empty() && !classes.Has(topic.priority)) {
    return classes.Unknown(lines.priority, Child(path, "priority"), topic.priority);
  }
  if (topic.priority.empty() && !classes.empty() && config.default_priority.empty()) {
    return reader.Error(lines.item, Child(path, "priority"),
                        absl::StrCat("missing; topic \"", topic.name,
                                     "\" needs a priority class (", classes.known(),
                                     "), or set priorities.default for topics "
                                     "without one"));
  }
  std::string type;
  if (topic.type.kind == FieldSource::Kind::kConstant) {
    type = topic.type.argument;
  } else if (topic.type.kind == FieldSource::Kind::kTopic) {
    type = topic.name;
  } else {
    return absl::OkStatus();
  }
  for (const ProcessorConfig& processor : config.processors) {
    for (const std::string& handled : processor.event_types) {
      if (handled == "*" || handled == type) return absl::OkStatus();
    }
  }
  return reader.Error(lines.type > 0 ? lines.type : lines.name, Child(path, "type"),
                      absl::StrCat("every record of topic \"", topic.name,
                                   "\" has event type \"", type,
                                   "\", which no processor handles; add it to a "
                                   "processor's event_types or add a processor "
                                   "with event_types: [\"*\"]"));
}

absl::Status CheckScheduling(const YamlReader& reader, const ParseNotes& notes,
                             const Config& config) {
  const ClassNames classes(reader, config);
  if (!config.default_priority.empty() && !classes.Has(config.default_priority)) {
    return classes.Unknown(notes.default_priority_line, "priorities.default",
                           config.default_priority);
  }
  for (const auto& [type, name] : config.priority_by_type) {
    if (classes.Has(name)) continue;
    auto line = notes.priority_by_type_lines.find(type);
    return classes.Unknown(
        line != notes.priority_by_type_lines.end() ? line->second : notes.priorities_line,
        absl::StrCat("priorities.event_types.", type), name);
  }
  for (size_t i = 0; i < config.topics.size(); ++i) {
    const TopicLines lines = i < notes.topic_lines.size()
                                 ? notes.topic_lines[i]
                                 : TopicLines{notes.root_line, notes.root_line, 0, 0};
    absl::Status status = CheckTopic(reader, classes, config, i, lines);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

std::string DefaultMetricsListenAddress(const std::string& listen_address) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos) return "127.0.0.1:9464";
  const std::string host = listen_address.substr(0, colon);
  const std::string port = listen_address.substr(colon + 1);
  return absl::StrCat(host, ":", port == "0" ? "0" : "9464");
}

absl::Status ApplyDefaultsAndCheck(const YamlReader& reader, const ParseNotes& notes,
                                  Config* config) {
  absl::Status status = CheckRequiredSections(reader, notes);
  if (status.ok()) status = ApplyControlTopic(reader, notes, config);
  if (!status.ok()) return status;
  if (!notes.has_metrics_listen) {
    config->metrics_listen_address = DefaultMetricsListenAddress(config->listen_address);
  }
  status = ApplyFailurePolicy(reader, notes, config);
  if (!status.ok()) return status;
  if (!notes.has_lane_count) config->lane_count = AutoLaneCount(config->processors);
  if (!notes.has_max_delayed_events) config->max_delayed_events = config->max_buffered_events;
  status = CheckConcurrencyLimits(reader, notes, *config);
  if (!status.ok()) return status;
  return CheckScheduling(reader, notes, *config);
}

}  // namespace ferry
