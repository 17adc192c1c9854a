// DescribePartitions: partitions as one log-friendly line ("t/0,t/1", or
// "(none)"), for the consumer's components' log messages.
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

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_PARTITION_TEXT_H_
