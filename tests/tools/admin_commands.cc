// kafka_tool create-topic / offsets-for-time: Admin API topic creation and
// offsets by record timestamp (both need a real broker for meaningful
// answers; see kafka_admin.h).
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/tools/kafka_admin.h"
#include "tests/tools/kafka_tool_commands.h"

namespace ferry::test_tools {

int RunCreateTopic(const CreateTopicOptions& o) {
  const char* problem = nullptr;
  if (o.bootstrap.empty()) problem = "--bootstrap is required";
  else if (o.topic.empty()) problem = "--topic is required";
  else if (o.partitions < 1) problem = "--partitions (>= 1) is required";
  else if (o.replication_factor < 1) problem = "--replication_factor must be >= 1";
  if (problem != nullptr) {
    std::fprintf(stderr, "create-topic: %s\n", problem);
    return kExitUsage;
  }
  const absl::Status status = CreateTopic(o.bootstrap, o.topic, o.partitions,
                                          o.replication_factor, {}, o.timeout);
  if (!status.ok()) {
    std::fprintf(stderr, "create-topic: %s\n", status.ToString().c_str());
    return kExitFailure;
  }
  std::printf("created topic %s with %d partitions\n", o.topic.c_str(),
              o.partitions);
  return kExitOk;
}

int RunOffsetsForTime(const OffsetsForTimeOptions& o) {
  const char* problem = nullptr;
  if (o.bootstrap.empty()) problem = "--bootstrap is required";
  else if (o.topic.empty()) problem = "--topic is required";
  else if (!o.timestamp_ms.has_value()) problem = "--timestamp_ms is required";
  if (problem != nullptr) {
    std::fprintf(stderr, "offsets-for-time: %s\n", problem);
    return kExitUsage;
  }
  absl::StatusOr<OffsetMap> offsets =
      OffsetsForTime(o.bootstrap, o.topic, *o.timestamp_ms);
  if (!offsets.ok()) {
    std::fprintf(stderr, "offsets-for-time: %s\n",
                 offsets.status().ToString().c_str());
    return kExitFailure;
  }
  for (const auto& [partition, offset] : *offsets) {
    std::printf("partition=%d offset=%lld\n", partition,
                static_cast<long long>(offset));
  }
  return kExitOk;
}

}  // namespace ferry::test_tools
