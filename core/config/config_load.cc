// Loading a config file and the checks that go beyond its text (the part of
// core/config/config.h that touches files and librdkafka); ParseConfig is in
// config.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "core/config/config_files.h"
#include "core/config/group_protocol.h"
#include "core/config/kafka_property_validator.h"

namespace ferry {
namespace {

std::string LocationOf(const Config& config, const std::string& setting) {
  auto it = config.locations.find(setting);
  return it != config.locations.end() ? it->second : "";
}

// The line of a `<file>:<line>` location (0 when there is none).
int LineOf(const std::string& location) {
  int line = 0;
  const size_t colon = location.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(location.substr(colon + 1), &line)) return 0;
  return line;
}

void AddTlsFiles(const Config& config, const TlsFiles& tls, const std::string& path,
                 const char* ca_key, std::vector<NamedFile>* files) {
  const std::pair<const char*, const std::string*> named[] = {
      {"cert_file", &tls.cert_file}, {"key_file", &tls.key_file}, {ca_key, &tls.ca_file}};
  for (const auto& [key, file] : named) {
    if (file->empty()) continue;
    const std::string setting = absl::StrCat(path, ".", key);
    files->push_back(NamedFile{setting, *file, LocationOf(config, setting)});
  }
}

}  // namespace

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat("cannot read config file ", path,
                                            ": ", std::strerror(err)));
  }
  // One byte over the limit is enough for ParseConfig to refuse the file,
  // so a 5 GB file (or /dev/zero) is never read whole.
  std::string contents;
  char buffer[16384];
  size_t n = 0;
  while (contents.size() <= static_cast<size_t>(kMaxConfigFileBytes) &&
         (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  const bool failed = std::ferror(file) != 0;
  const int err = errno;
  std::fclose(file);
  if (failed) {
    return absl::NotFoundError(absl::StrCat("cannot read config file ", path,
                                            ": ", std::strerror(err)));
  }
  absl::StatusOr<Config> config = ParseConfig(contents, path);
  if (!config.ok()) return config.status();
  absl::Status references = CheckConfigReferences(*config);
  if (!references.ok()) return references;
  return config;
}

absl::Status CheckConfigReferences(const Config& config) {
  std::vector<KafkaProperty> properties;
  for (const auto& [name, value] : config.kafka) {
    properties.push_back(KafkaProperty{name, value, LocationOf(config, "kafka." + name)});
  }
  absl::Status status = ValidateKafkaProperties(properties);
  if (!status.ok()) return status;
  status = CheckGroupProtocolProperties(properties);
  if (!status.ok()) return status;

  std::vector<NamedFile> files;
  if (!config.control_token_file.empty()) {
    files.push_back(NamedFile{"control.token_file", config.control_token_file,
                              LocationOf(config, "control.token_file")});
  }
  AddTlsFiles(config, config.server_tls, "server.tls", "client_ca_file", &files);
  for (size_t i = 0; i < config.processors.size(); ++i) {
    AddTlsFiles(config, config.processors[i].tls, absl::StrCat("processors[", i, "].tls"),
                "ca_file", &files);
  }
  // The first problem in the file's order (config.locations is by key).
  std::stable_sort(files.begin(), files.end(), [](const NamedFile& a, const NamedFile& b) {
    return LineOf(a.location) < LineOf(b.location);
  });
  for (const NamedFile& file : files) {
    status = CheckNamedFile(file);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status LocateConfigError(const Config& config, const absl::Status& status) {
  const absl::string_view message = status.message();
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& entry : config.locations) {
    if (absl::StartsWith(message, absl::StrCat(entry.first, ":")) &&
        (best == nullptr || entry.first.size() > best->first.size())) {
      best = &entry;
    }
  }
  if (best == nullptr) return status;
  return absl::Status(status.code(), absl::StrCat(best->second, ": ", message));
}

std::string EmbeddedDefaultConfigYaml() {
  return R"yaml(# ferry's built-in demo configuration (used when no --config is given).
#
# There is no kafka.bootstrap.servers, so ferry starts an in-process mock Kafka
# cluster and consumes from it; point a worker at 127.0.0.1:50051 to try it out.
kafka:
  group.id: ferry-demo
topics:
  - name: events
    ordering: key
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
    streams: 2
    # Protecting what the worker calls (README "Protecting downstream"),
    # all off here:
    # rate_limit: 200/s
    # concurrency: adaptive
    # circuit_breaker: on
embedded:
  partitions: 8
log:
  progress_interval: 2s
)yaml";
}

}  // namespace ferry
