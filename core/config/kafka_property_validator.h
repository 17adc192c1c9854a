// Checks the `kafka:` properties of a config with librdkafka itself, before
// anything connects: an unknown name or a value librdkafka refuses (a range,
// an enum, a number) is a config error with the file and line of its key,
// found by `ferry --check_config` rather than by a real start.
//
// It sets every property on a scratch configuration object (no client is
// created, nothing touches the network). Properties that only a client
// checks when it is created (combinations of properties) are left to it.
//
// Threading: a pure function; call it from any thread.
#ifndef FERRY_CORE_CONFIG_KAFKA_PROPERTY_VALIDATOR_H_
#define FERRY_CORE_CONFIG_KAFKA_PROPERTY_VALIDATOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ferry {

struct KafkaProperty {
  std::string name;   // e.g. "session.timeout.ms"
  std::string value;
  // Where it was written, `ferry.yaml:4` (empty: unknown).
  std::string location;
};

// OK, or InvalidArgument for the first property librdkafka refuses:
//   `ferry.yaml:4: kafka.session.timeout.ms: librdkafka rejects "banana": ...`
absl::Status ValidateKafkaProperties(const std::vector<KafkaProperty>& properties);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_KAFKA_PROPERTY_VALIDATOR_H_
