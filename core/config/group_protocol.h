// The consumer group protocol a `kafka:` map asks for (librdkafka's
// `group.protocol`: `classic`, the default, or `consumer`, KIP-848) and the
// properties that only the classic protocol takes. With `consumer` the broker
// owns the session timeout, the heartbeat interval and the assignor, and
// librdkafka refuses to create a consumer that sets them; ferry says so at
// config time, with the line of the property, instead of at start.
//
// Threading: pure functions; call them from any thread.
#ifndef FERRY_CORE_CONFIG_GROUP_PROTOCOL_H_
#define FERRY_CORE_CONFIG_GROUP_PROTOCOL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/kafka_property_validator.h"

namespace ferry {

// True when `group.protocol` is `consumer` (case-insensitive, as librdkafka
// reads it); false for `classic` or when it is not set.
bool UsesConsumerGroupProtocol(const std::map<std::string, std::string>& kafka);

// OK, or InvalidArgument for the first classic-only property set together
// with `group.protocol: consumer`:
//   `ferry.yaml:4: kafka.session.timeout.ms: not allowed with
//    kafka.group.protocol: consumer (the broker sets it:
//    group.consumer.session.timeout.ms)`
absl::Status CheckGroupProtocolProperties(const std::vector<KafkaProperty>& properties);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_GROUP_PROTOCOL_H_
