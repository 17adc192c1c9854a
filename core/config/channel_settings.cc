#include "core/config/channel_settings.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/config/keepalive.h"

namespace ferry {

using config_yaml::Child;
using config_yaml::YamlReader;

namespace {

// The example shown when a `tls:` file setting is empty or not a scalar.
std::string TlsExample(const std::string& key) {
  const char* file = key == "key_file" ? "tls.key" : key == "cert_file" ? "tls.crt" : "ca.crt";
  return absl::StrCat(key, ": /etc/ferry/tls/", file);
}

}  // namespace

absl::Status ReadTls(YamlReader& reader, const YAML::Node& node, const std::string& path,
                     int line, bool server, TlsFiles* out) {
  std::vector<std::string> known = {"cert_file", "key_file"};
  known.push_back(server ? "client_ca_file" : "ca_file");
  if (!server) known.push_back("server_name");
  out->enabled = true;
  absl::Status status = reader.ForEachField(
      node, path, line, known,
      [&](const std::string& k, const std::string& p, int, const YAML::Node& v,
          int l) -> absl::Status {
        std::string* field = k == "cert_file"     ? &out->cert_file
                             : k == "key_file"    ? &out->key_file
                             : k == "server_name" ? &out->server_name
                                                  : &out->ca_file;
        if (k != "server_name") reader.Locate(p, l);
        return reader.GetNonEmptyString(v, p, l, TlsExample(k), field);
      });
  if (!status.ok()) return status;
  if (out->cert_file.empty() != out->key_file.empty()) {
    return reader.Error(line, path,
                        "cert_file and key_file go together; set both (PEM files)");
  }
  if (server && out->cert_file.empty()) {
    return reader.Error(line, Child(path, "cert_file"),
                        "missing; a TLS server needs `cert_file` and `key_file` "
                        "(PEM); remove `tls:` to serve plaintext");
  }
  return absl::OkStatus();
}

absl::Status ReadKeepalive(const YamlReader& reader, const YAML::Node& node,
                           const std::string& path, int line, KeepaliveConfig* out) {
  return reader.ForEachField(
      node, path, line, {"interval", "timeout"},
      [&](const std::string& key, const std::string& child, int, const YAML::Node& value,
          int value_line) -> absl::Status {
        const bool interval = key == "interval";
        absl::Duration* field = interval ? &out->interval : &out->timeout;
        absl::Status status =
            reader.GetDuration(value, child, value_line, /*allow_zero=*/false,
                               interval ? "interval: 5s" : "timeout: 5s", field);
        if (!status.ok()) return status;
        // Below these, workers' gRPC servers (ferry's SDKs permit 1s) answer
        // the pings with GOAWAY too_many_pings.
        const absl::Duration minimum = interval ? kMinKeepaliveInterval : kMinKeepaliveTimeout;
        if (*field < minimum) {
          return reader.Error(value_line, child,
                              absl::StrCat("must be at least ", absl::FormatDuration(minimum)));
        }
        return absl::OkStatus();
      });
}

}  // namespace ferry
