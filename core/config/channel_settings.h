// Settings of a gRPC endpoint that appear in more than one section: `tls:`
// (server.tls and processors[i].tls) and `keepalive:` (processors[i]).
//
// Threading: the parsing thread only.
#ifndef FERRY_CORE_CONFIG_CHANNEL_SETTINGS_H_
#define FERRY_CORE_CONFIG_CHANNEL_SETTINGS_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/status.h"
#include "core/config/config_types.h"
#include "core/config/yaml_reader.h"

namespace ferry {

// `tls:` of server.tls (`server` true: cert_file and key_file required,
// client_ca_file) or of a processor (ca_file, server_name). The file
// settings' lines are recorded for CheckConfigReferences.
absl::Status ReadTls(config_yaml::YamlReader& reader, const YAML::Node& node,
                     const std::string& path, int line, bool server, TlsFiles* out);

// processors[i].keepalive: {interval, timeout}, each at least its minimum
// (core/config/keepalive.h).
absl::Status ReadKeepalive(const config_yaml::YamlReader& reader, const YAML::Node& node,
                           const std::string& path, int line, KeepaliveConfig* out);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_CHANNEL_SETTINGS_H_
