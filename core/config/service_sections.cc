#include "core/config/service_sections.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/config/channel_settings.h"

namespace ferry {

using config_yaml::YamlReader;

absl::Status ParseLanesSection(YamlReader& reader, const YAML::Node& node,
                               const std::string& path, int line, Config* config,
                               ParseNotes* notes) {
  return reader.ForEachField(
      node, path, line, {"count", "capacity"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "count") {
          if (v.IsScalar() && v.Scalar() == "auto") return absl::OkStatus();
          notes->has_lane_count = true;
          return reader.GetInt(v, p, l, 1, "count: 2048 (or auto)", &config->lane_count);
        }
        return reader.GetInt(v, p, l, 1, "capacity: 4096", &config->lane_capacity);
      });
}

absl::Status ParseBudgetsSection(YamlReader& reader, const YAML::Node& node,
                                 const std::string& path, int line, Config* config,
                                 ParseNotes* notes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return reader.ForEachField(
      node, path, line,
      {"max_buffered_events", "max_buffered_bytes", "resume_fraction", "max_delayed_events"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "max_delayed_events") {
          notes->has_max_delayed_events = true;
          return reader.GetInt64(v, p, l, 1, kMax, "max_delayed_events: 10000",
                                 &config->max_delayed_events);
        }
        if (k == "max_buffered_events") {
          return reader.GetInt64(v, p, l, 1, kMax, "max_buffered_events: 100000",
                                 &config->max_buffered_events);
        }
        if (k == "max_buffered_bytes") {
          return reader.GetBytes(v, p, l, &config->max_buffered_bytes);
        }
        return reader.GetFraction(v, p, l, &config->resume_fraction);
      });
}

absl::Status ParseCommitSection(YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {"interval"},
      [&](const std::string&, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        return reader.GetDuration(v, p, l, /*allow_zero=*/false, "interval: 1s",
                                  &config->commit_interval);
      });
}

absl::Status ParseShutdownSection(YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {"grace"},
      [&](const std::string&, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        return reader.GetDuration(v, p, l, /*allow_zero=*/true, "grace: 20s",
                                  &config->shutdown_grace);
      });
}

absl::Status ParseLogSection(YamlReader& reader, const YAML::Node& node,
                             const std::string& path, int line, Config* config,
                             ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {"progress_interval", "format"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "format") {
          std::string format;
          absl::Status got = reader.GetScalar(v, p, l, "format: json", &format);
          if (!got.ok()) return got;
          if (format != "text" && format != "json") {
            return reader.Error(l, p,
                                absl::StrCat("expected text or json, got \"",
                                             absl::CEscape(format), "\""));
          }
          config->log_format = format;
          return absl::OkStatus();
        }
        return reader.GetDuration(v, p, l, /*allow_zero=*/true, "progress_interval: 5s",
                                  &config->progress_interval);
      });
}

absl::Status ParseFailuresSection(YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes* notes) {
  notes->failures_line = line;
  return reader.ForEachField(
      node, path, line, {"on_failure", "dead_letter_topic", "max_event_bytes"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "on_failure") {
          notes->has_default_policy = true;
          return reader.GetEnum<FailurePolicy>(v, p, l, "policy",
                                               {{"dlq", FailurePolicy::kDeadLetter},
                                                {"skip", FailurePolicy::kSkip},
                                                {"block", FailurePolicy::kBlock}},
                                               &config->on_failure);
        }
        if (k == "dead_letter_topic") {
          return reader.GetNonEmptyString(v, p, l, "dead_letter_topic: ferry-dlq",
                                          &config->dead_letter_topic);
        }
        absl::Status bytes = reader.GetBytes(v, p, l, &config->max_event_bytes);
        if (!bytes.ok()) return bytes;
        if (config->max_event_bytes < 1024) {
          return reader.Error(l, p, "must be at least 1KiB, e.g. `3MiB`");
        }
        return absl::OkStatus();
      });
}

absl::Status ParseControlSection(YamlReader& reader, const YAML::Node& node,
                                 const std::string& path, int line, Config* config,
                                 ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {"token_file", "topic", "catch_up_timeout"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "token_file") {
          reader.Locate(p, l);
          return reader.GetNonEmptyString(v, p, l, "token_file: /etc/ferry/token/token",
                                          &config->control_token_file);
        }
        if (k == "catch_up_timeout") {
          return reader.GetDuration(v, p, l, /*allow_zero=*/true, "catch_up_timeout: 10s",
                                    &config->control_catch_up_timeout);
        }
        absl::Status got = reader.GetNonEmptyString(v, p, l, "topic: ferry.control.orders",
                                                    &config->control_topic);
        if (!got.ok()) return got;
        if (config->control_topic.size() > 249 ||
            config->control_topic.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789._-") != std::string::npos) {
          return reader.Error(l, p,
                              "not a valid Kafka topic name (use letters, "
                              "digits, '.', '_' and '-', at most 249)");
        }
        return absl::OkStatus();
      });
}

absl::Status ParseServerSection(YamlReader& reader, const YAML::Node& node,
                                const std::string& path, int line, Config* config,
                                ParseNotes* notes) {
  return reader.ForEachField(
      node, path, line, {"listen", "metrics_listen", "health_listen", "tls"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "health_listen") {
          return reader.GetListenAddress(v, p, l, &config->health_listen_address);
        }
        if (k == "tls") return ReadTls(reader, v, p, l, /*server=*/true, &config->server_tls);
        if (k == "metrics_listen") {
          notes->has_metrics_listen = true;
          if (v.IsScalar() && v.Scalar() == "off") {
            config->metrics_listen_address.clear();
            return absl::OkStatus();
          }
          return reader.GetListenAddress(v, p, l, &config->metrics_listen_address);
        }
        return reader.GetListenAddress(v, p, l, &config->listen_address);
      });
}

absl::Status ParseEmbeddedSection(YamlReader& reader, const YAML::Node& node,
                                  const std::string& path, int line, Config* config,
                                  ParseNotes*) {
  return reader.ForEachField(
      node, path, line, {"partitions", "bootstrap_file"},
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        if (k == "partitions") {
          return reader.GetInt(v, p, l, 1, "partitions: 8", &config->embedded_partitions);
        }
        return reader.GetNonEmptyString(v, p, l, "bootstrap_file: /tmp/ferry-bootstrap",
                                        &config->embedded_bootstrap_file);
      });
}

}  // namespace ferry
