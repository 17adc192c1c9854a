// RdPartitionList: owns the RdKafka::TopicPartition pointers librdkafka's
// C++ API wants, built from ferry's partitions or commit positions.
//
// Threading: one owner; not shared.
#ifndef FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_
#define FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_

#include <librdkafka/rdkafkacpp.h>

#include <vector>

#include "core/engine/types.h"

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

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_RD_PARTITION_LIST_H_
