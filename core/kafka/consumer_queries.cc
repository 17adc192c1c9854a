// KafkaConsumer's read-only queries for other threads (end offsets, the
// group's committed offsets, fetch state): librdkafka's caches and the
// assignment copy, never the poll thread's state.
#include <map>
#include <set>
#include <vector>

#include "core/kafka/consumer.h"
#include "core/common/kafka_status.h"
#include "core/kafka/flow_control.h"
#include "core/kafka/rd_partition_list.h"
#include "core/kafka/rebalance.h"

namespace ferry {
namespace {

// librdkafka's watermark cache holds RD_KAFKA_OFFSET_INVALID (-1001) for a
// partition until its first fetch answer; ferry's API says -1 for "not known".
int64_t KnownOffsetOrMinusOne(int64_t offset) { return offset >= 0 ? offset : -1; }

}  // namespace

std::map<TopicPartition, int64_t> KafkaConsumer::HighWatermarks() const {
  const std::vector<TopicPartition> assignment = rebalancer_->AssignmentCopy();
  std::map<TopicPartition, int64_t> result;
  for (const TopicPartition& tp : assignment) {
    int64_t low = -1;
    int64_t high = -1;
    if (consumer_->get_watermark_offsets(tp.topic, tp.partition, &low, &high) !=
        RdKafka::ERR_NO_ERROR) {
      high = -1;
    }
    result[tp] = KnownOffsetOrMinusOne(high);
  }
  return result;
}

absl::StatusOr<std::map<TopicPartition, int64_t>> KafkaConsumer::Committed(
    const std::vector<TopicPartition>& partitions, absl::Duration timeout) const {
  std::map<TopicPartition, int64_t> committed;
  if (partitions.empty()) return committed;
  RdPartitionList list(partitions);
  const RdKafka::ErrorCode err = consumer_->committed(
      list.get(), static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (err != RdKafka::ERR_NO_ERROR) return KafkaErrorToStatus(err, "committed offsets");
  for (size_t i = 0; i < partitions.size(); ++i) {
    const int64_t offset = list.get()[i]->offset();
    committed[partitions[i]] = offset >= 0 ? offset : -1;
  }
  return committed;
}

std::map<TopicPartition, PartitionFetchState> KafkaConsumer::FetchStates() const {
  const std::vector<TopicPartition> assignment = rebalancer_->AssignmentCopy();
  const FlowControl::Snapshot flow = flow_->snapshot();
  std::map<TopicPartition, PartitionFetchState> result;
  if (assignment.empty()) return result;
  RdPartitionList positions(assignment);
  const bool have_positions = consumer_->position(positions.get()) == RdKafka::ERR_NO_ERROR;
  for (size_t i = 0; i < assignment.size(); ++i) {
    const TopicPartition& tp = assignment[i];
    PartitionFetchState& state = result[tp];
    int64_t low = -1;
    int64_t high = -1;
    if (consumer_->get_watermark_offsets(tp.topic, tp.partition, &low, &high) ==
        RdKafka::ERR_NO_ERROR) {
      state.high_watermark = KnownOffsetOrMinusOne(high);
    }
    if (have_positions) {
      const int64_t position = positions.get()[i]->offset();
      state.position = position >= 0 ? position : -1;
    }
    state.paused = flow.paused || flow.held.count(tp) > 0;
  }
  return result;
}

}  // namespace ferry
