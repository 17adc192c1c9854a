#include "core/config/group_protocol.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

struct ClassicOnly {
  const char* name;
  const char* instead;  // what takes its place under the consumer protocol
};

// librdkafka 2.15.1's list (rd_kafka_conf_finalize).
constexpr ClassicOnly kClassicOnly[] = {
    {"session.timeout.ms", "the broker sets it: group.consumer.session.timeout.ms"},
    {"heartbeat.interval.ms", "the broker sets it: group.consumer.heartbeat.interval.ms"},
    {"partition.assignment.strategy",
     "the broker assigns; kafka.group.remote.assignor picks its assignor"},
    {"group.protocol.type", "classic protocol only"},
};

}  // namespace

bool UsesConsumerGroupProtocol(const std::map<std::string, std::string>& kafka) {
  auto it = kafka.find("group.protocol");
  return it != kafka.end() && absl::EqualsIgnoreCase(it->second, "consumer");
}

absl::Status CheckGroupProtocolProperties(const std::vector<KafkaProperty>& properties) {
  const KafkaProperty* protocol = nullptr;
  for (const KafkaProperty& property : properties) {
    if (property.name == "group.protocol") protocol = &property;
  }
  if (protocol == nullptr || !absl::EqualsIgnoreCase(protocol->value, "consumer")) {
    return absl::OkStatus();
  }
  for (const KafkaProperty& property : properties) {
    for (const ClassicOnly& classic : kClassicOnly) {
      if (property.name != classic.name) continue;
      const std::string where =
          property.location.empty() ? "" : absl::StrCat(property.location, ": ");
      const std::string protocol_where =
          protocol->location.empty() ? "" : absl::StrCat(" (", protocol->location, ")");
      return absl::InvalidArgumentError(
          absl::StrCat(where, "kafka.", property.name, ": not allowed with kafka.group.protocol: ",
                       "consumer", protocol_where, "; ", classic.instead,
                       ". Remove it, or use group.protocol: classic"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry
