#include "core/config/kafka_property_validator.h"

#include <librdkafka/rdkafkacpp.h>

#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/kafka_status.h"

namespace ferry {
namespace {

// Values of these are secrets: an error names the property, not the value.
bool IsSecret(absl::string_view name) {
  return absl::StrContains(name, "password") || absl::StrContains(name, "secret") ||
         absl::StrContains(name, ".pem") || absl::StrContains(name, "oauthbearer.config");
}

}  // namespace

absl::Status ValidateKafkaProperties(const std::vector<KafkaProperty>& properties) {
  std::unique_ptr<RdKafka::Conf> scratch(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  // Plugins add properties of their own, so they are loaded first (a real
  // start loads them too).
  std::vector<const KafkaProperty*> ordered;
  for (const KafkaProperty& property : properties) {
    if (property.name == "plugin.library.paths") ordered.insert(ordered.begin(), &property);
    else ordered.push_back(&property);
  }
  for (const KafkaProperty* property : ordered) {
    std::string error;
    const RdKafka::Conf::ConfResult result = scratch->set(property->name, property->value, error);
    const std::string setting = absl::StrCat("kafka.", absl::CEscape(property->name));
    absl::Status status = KafkaConfResultToStatus(
        result, error,
        property->location.empty() ? setting : absl::StrCat(property->location, ": ", setting),
        IsSecret(property->name) ? "(hidden)" : absl::CEscape(property->value));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace ferry
