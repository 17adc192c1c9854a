// Kafka queries for tests and test tools: partition counts, committed
// offsets of a consumer group, end offsets (high watermarks), offsets for a
// timestamp; and topic creation (the only call here that changes anything).
//
// A thin wrapper: topics and offsets go through core/kafka/admin
// (KafkaAdmin), committed offsets and reading records through a consumer.
// Each call opens its own short-lived librdkafka handle, so callers need no
// setup and may call from any thread. Nothing here joins a consumer group or
// auto-creates topics: metadata is read for all topics and the named one is
// looked up (the librdkafka 2.0.2 mock cluster would otherwise auto-create an
// unknown topic with 4 partitions).
#ifndef FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_
#define FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry::test_tools {

// Offset per partition id.
using OffsetMap = std::map<int32_t, int64_t>;

// The committed offset reported for a partition the group never committed
// (librdkafka returns OFFSET_INVALID, -1001, which is normalised to this).
inline constexpr int64_t kNoCommittedOffset = -1;

inline constexpr absl::Duration kDefaultAdminTimeout = absl::Seconds(10);

// Number of brokers the cluster's metadata lists (a liveness probe: any
// answer means the bootstrap server serves requests).
absl::StatusOr<int> ReadBrokerCount(
    const std::string& bootstrap, absl::Duration timeout = kDefaultAdminTimeout);

// Number of partitions of `topic`. NotFound when the topic does not exist.
absl::StatusOr<int32_t> ReadPartitionCount(
    const std::string& bootstrap, const std::string& topic,
    absl::Duration timeout = kDefaultAdminTimeout);

// The committed offset of every partition of `topic` for consumer group
// `group` (kNoCommittedOffset where nothing was committed). Uses a consumer
// with that group.id that never subscribes, so the group is not disturbed.
absl::StatusOr<OffsetMap> ReadCommittedOffsets(
    const std::string& bootstrap, const std::string& topic,
    const std::string& group, absl::Duration timeout = kDefaultAdminTimeout);

// The end offset (high watermark) of every partition of `topic`.
absl::StatusOr<OffsetMap> ReadEndOffsets(
    const std::string& bootstrap, const std::string& topic,
    absl::Duration timeout = kDefaultAdminTimeout);

// Committed and end offsets of one partition.
struct PartitionOffsets {
  int32_t partition = 0;
  int64_t committed = kNoCommittedOffset;
  int64_t end = 0;
};

// Committed vs end offsets of a whole topic for one group.
struct GroupProgress {
  std::vector<PartitionOffsets> partitions;  // sorted by partition id

  int64_t TotalCommitted() const;  // sum of committed offsets >= 0
  int64_t TotalEnd() const;
  // True iff committed == end for every partition (and there is at least
  // one partition). An empty partition (end 0) counts as caught up even when
  // nothing was committed.
  bool AllCommitted() const;
};

absl::StatusOr<GroupProgress> ReadGroupProgress(
    const std::string& bootstrap, const std::string& topic,
    const std::string& group, absl::Duration timeout = kDefaultAdminTimeout);

// One `partition=<p> committed=<c> end=<e>` line per partition, then
// `total_committed=<sum> total_end=<sum> all_committed=<true|false>`; every
// line ends with '\n'.
std::string FormatGroupProgress(const GroupProgress& progress);

// The offset returned by OffsetsForTime for a partition that has no record
// with a timestamp >= the one asked for (librdkafka's RD_KAFKA_OFFSET_END:
// the broker answers ListOffsets with offset -1, "past the end").
inline constexpr int64_t kOffsetPastEnd = -1;

// For every partition of `topic`, the earliest offset whose record timestamp
// is >= `timestamp_ms` (librdkafka's offsetsForTimes, i.e. ListOffsets by
// timestamp), or kOffsetPastEnd when no record is that late. Needs a real
// broker: librdkafka 2.0.2's mock cluster answers -1 for every timestamp.
absl::StatusOr<OffsetMap> OffsetsForTime(
    const std::string& bootstrap, const std::string& topic,
    int64_t timestamp_ms, absl::Duration timeout = kDefaultAdminTimeout);

// Creates `topic` with `partitions` partitions (Admin API CreateTopics), then
// waits until the metadata shows all of them with a leader, so the topic is
// usable when this returns. AlreadyExists when the topic exists (checked
// before creating). `config` holds topic configs (e.g. {"retention.ms", "-1"}).
// librdkafka 2.0.2's mock cluster does not answer CreateTopics (the call
// times out waiting for a controller): create its topics with
// `kafka_tool mock --topics`.
absl::Status CreateTopic(
    const std::string& bootstrap, const std::string& topic,
    int32_t partitions, int16_t replication_factor = 1,
    const std::vector<std::pair<std::string, std::string>>& config = {},
    absl::Duration timeout = absl::Seconds(30));

// One record as read back from a topic.
struct ConsumedRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = 0;
  // The value of the last header called `name`, or "" if none.
  std::string Header(const std::string& name) const;
};

// Every record of `topic`, from the beginning of each partition up to the
// end offsets as they are when called (assigned, not subscribed: no group is
// joined). Sorted by partition, then offset. NotFound if the topic is missing.
absl::StatusOr<std::vector<ConsumedRecord>> ReadTopic(
    const std::string& bootstrap, const std::string& topic,
    absl::Duration timeout = absl::Seconds(30));

}  // namespace ferry::test_tools

#endif  // FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_
