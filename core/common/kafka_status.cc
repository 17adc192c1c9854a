#include "core/common/kafka_status.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

// librdkafka's reasons may quote the value as written; a newline in it must
// not start a forged line in ferry's log.
std::string EscapeControlCharacters(absl::string_view text) {
  std::string out;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += absl::CEscape(absl::string_view(&c, 1));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

absl::Status KafkaErrorToStatus(RdKafka::ErrorCode code, absl::string_view context) {
  if (code == RdKafka::ERR_NO_ERROR) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", RdKafka::err2str(code));
  switch (code) {
    case RdKafka::ERR__INVALID_ARG:
    case RdKafka::ERR__UNKNOWN_TOPIC:
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED:
    case RdKafka::ERR_GROUP_AUTHORIZATION_FAILED:
    case RdKafka::ERR_INVALID_PARTITIONS:
    case RdKafka::ERR_INVALID_REPLICATION_FACTOR:
    case RdKafka::ERR_INVALID_CONFIG:
    case RdKafka::ERR_TOPIC_EXCEPTION:
      return absl::InvalidArgumentError(message);
    case RdKafka::ERR_TOPIC_ALREADY_EXISTS:
      return absl::AlreadyExistsError(message);
    case RdKafka::ERR_ILLEGAL_GENERATION:
    case RdKafka::ERR_UNKNOWN_MEMBER_ID:
    case RdKafka::ERR_REBALANCE_IN_PROGRESS:
    case RdKafka::ERR__STATE:
    case RdKafka::ERR__ASSIGNMENT_LOST:
      return absl::FailedPreconditionError(message);
    case RdKafka::ERR__TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case RdKafka::ERR__NO_OFFSET:
      return absl::NotFoundError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::Status KafkaConfResultToStatus(RdKafka::Conf::ConfResult result, absl::string_view error,
                                     absl::string_view context, absl::string_view value) {
  switch (result) {
    case RdKafka::Conf::CONF_OK:
      return absl::OkStatus();
    case RdKafka::Conf::CONF_UNKNOWN:
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": not a librdkafka property (", EscapeControlCharacters(error),
                       "); see CONFIGURATION.md of librdkafka ", RdKafka::version_str(),
                       " for the names"));
    case RdKafka::Conf::CONF_INVALID:
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": librdkafka rejects \"", value,
                       "\": ", EscapeControlCharacters(error)));
  }
}

bool IsConsumerOnlyProperty(const std::string& name) {
  static const char* const kConsumerOnly[] = {
      "group.id", "group.instance.id", "session.timeout.ms", "heartbeat.interval.ms",
      "auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store",
      "auto.commit.interval.ms", "partition.assignment.strategy", "max.poll.interval.ms",
      "fetch.wait.max.ms", "fetch.min.bytes", "fetch.max.bytes", "fetch.message.max.bytes",
      "queued.min.messages", "queued.max.messages.kbytes", "enable.partition.eof",
      "isolation.level", "check.crcs", "group.protocol.type", "coordinator.query.interval.ms",
      "fetch.error.backoff.ms"};
  for (const char* property : kConsumerOnly) {
    if (name == property) return true;
  }
  return false;
}

}  // namespace ferry
