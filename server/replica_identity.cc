#include "server/replica_identity.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ferry {

std::string ReplicaIdentity(const std::map<std::string, std::string>& kafka_properties) {
  auto configured = kafka_properties.find("client.id");
  if (configured != kafka_properties.end() && !configured->second.empty()) {
    return configured->second;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return absl::StrCat("ferry-unknown/", getpid());
  return absl::StrCat("ferry-", host, "/", getpid());
}

}  // namespace ferry
