// Read-only Kafka queries for tests and test tools: partition counts,
// committed offsets of a consumer group, and end offsets (high watermarks).
//
// Each call opens its own short-lived librdkafka handle, so callers need no
// setup and may call from any thread. Nothing here joins a consumer group or
// auto-creates topics: metadata is read for all topics and the named one is
// looked up (the librdkafka 2.0.2 mock cluster would otherwise auto-create an
// unknown topic with 4 partitions).
#ifndef FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_
#define FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_

#include <cstdint>
#include <map>
#include <string>
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

}  // namespace ferry::test_tools

#endif  // FERRY_TESTS_TOOLS_KAFKA_ADMIN_H_
