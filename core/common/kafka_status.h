// The one place librdkafka error codes become absl::Status.
//
// Codes are chosen by what the caller should do: Unavailable for transient
// broker/transport trouble (retry), FailedPrecondition for group state that a
// rebalance will fix (retry after it), InvalidArgument for configuration
// (and topic specs a broker refuses), AlreadyExists for a topic created twice.
#ifndef FERRY_CORE_COMMON_KAFKA_STATUS_H_
#define FERRY_CORE_COMMON_KAFKA_STATUS_H_

#include <librdkafka/rdkafkacpp.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

absl::Status KafkaErrorToStatus(RdKafka::ErrorCode code, absl::string_view context);

// The result of RdKafka::Conf::set for `value` (as it should be quoted in
// the message): OK, or InvalidArgument
//   `<context>: librdkafka rejects "<value>": <librdkafka's reason>`
// for an unknown property or a value librdkafka refuses.
absl::Status KafkaConfResultToStatus(RdKafka::Conf::ConfResult result, absl::string_view error,
                                     absl::string_view context, absl::string_view value);

// True for librdkafka properties only a consumer understands; ferry's
// producers (dead letters, control topic) leave them out of the `kafka:` map
// they share with the consumer, so librdkafka does not warn about them.
bool IsConsumerOnlyProperty(const std::string& name);

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_KAFKA_STATUS_H_
