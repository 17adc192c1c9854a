// librdkafka glue for the consumer's components: RdPartitionList owns the
// RdKafka::TopicPartition pointers librdkafka's C++ API wants, built from
// ferry's partitions or commit positions; ToTopicPartitions goes the other
// way; RdFetchSwitch is FlowControl's FetchSwitch on a KafkaConsumer.
//
// Threading: one owner; not shared (RdFetchSwitch: the consumer's poll
// thread, like every pause/resume).
#ifndef FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_
#define FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_

#include <librdkafka/rdkafkacpp.h>

#include <vector>

#include "core/common/kafka_status.h"
#include "core/engine/types.h"
#include "core/kafka/flow_control.h"

namespace ferry {

class RdPartitionList {
 public:
  explicit RdPartitionList(const std::vector<TopicPartition>& partitions) {
    for (const TopicPartition& tp : partitions) {
      list_.push_back(RdKafka::TopicPartition::create(tp.topic, tp.partition));
    }
  }
  explicit RdPartitionList(const std::vector<CommitPosition>& positions) {
    for (const CommitPosition& position : positions) {
      list_.push_back(RdKafka::TopicPartition::create(position.partition.topic,
                                                      position.partition.partition,
                                                      position.offset));
    }
  }
  ~RdPartitionList() { RdKafka::TopicPartition::destroy(list_); }
  RdPartitionList(const RdPartitionList&) = delete;
  RdPartitionList& operator=(const RdPartitionList&) = delete;
  std::vector<RdKafka::TopicPartition*>& get() { return list_; }

 private:
  std::vector<RdKafka::TopicPartition*> list_;
};

inline std::vector<TopicPartition> ToTopicPartitions(
    const std::vector<RdKafka::TopicPartition*>& partitions) {
  std::vector<TopicPartition> result;
  result.reserve(partitions.size());
  for (const RdKafka::TopicPartition* partition : partitions) {
    result.push_back({partition->topic(), partition->partition()});
  }
  return result;
}

class RdFetchSwitch final : public FetchSwitch {
 public:
  explicit RdFetchSwitch(RdKafka::KafkaConsumer* consumer) : consumer_(consumer) {}
  absl::Status Pause(const std::vector<TopicPartition>& partitions) override {
    RdPartitionList list(partitions);
    return KafkaErrorToStatus(consumer_->pause(list.get()), "pause");
  }
  absl::Status Resume(const std::vector<TopicPartition>& partitions) override {
    RdPartitionList list(partitions);
    return KafkaErrorToStatus(consumer_->resume(list.get()), "resume");
  }

 private:
  RdKafka::KafkaConsumer* const consumer_;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_
