// DescribePartitions: partitions as one log-friendly line ("t/0,t/1", or
// "(none)"), and DescribePositions: commit positions as one ("t/0@42"), for
// the consumer's components' log messages.
//
// Threading: a pure function.
#ifndef FERRY_CORE_KAFKA_PARTITION_TEXT_H_
#define FERRY_CORE_KAFKA_PARTITION_TEXT_H_

#include <string>
#include <vector>

#include "core/engine/types.h"

namespace ferry {

inline std::string DescribePartitions(const std::vector<TopicPartition>& partitions) {
  std::string text;
  for (const TopicPartition& tp : partitions) {
    if (!text.empty()) text += ",";
    text += tp.ToString();
  }
  return text.empty() ? "(none)" : text;
}

inline std::string DescribePositions(const std::vector<CommitPosition>& positions) {
  std::string text;
  for (const CommitPosition& position : positions) {
    if (!text.empty()) text += ",";
    text += position.partition.ToString() + "@" + std::to_string(position.offset);
  }
  return text.empty() ? "(none)" : text;
}

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_PARTITION_TEXT_H_
