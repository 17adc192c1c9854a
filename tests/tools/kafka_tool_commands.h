// The subcommands of kafka_tool (see kafka_tool_main.cc). Each returns the
// process exit code: 0 on success, 1 on failure, 2 on bad usage.
#ifndef FERRY_TESTS_TOOLS_KAFKA_TOOL_COMMANDS_H_
#define FERRY_TESTS_TOOLS_KAFKA_TOOL_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace ferry::test_tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `mock`: an in-process librdkafka mock cluster (1 broker) until SIGTERM or
// SIGINT.
struct MockOptions {
  std::vector<std::string> topics;  // created up front
  int32_t partitions = 4;           // per created topic
  std::string bootstrap_file;       // written atomically when non-empty
  // The broker setting group.initial.rebalance.delay.ms: how long the first
  // member of an empty group waits for others before its assignment.
  // librdkafka's mock defaults to Kafka's 3000 ms; ferry's tests use 0, as
  // tests/kafka/kafka_broker does for the real broker.
  int32_t group_initial_rebalance_delay_ms = 0;
};
int RunMock(const MockOptions& options);

// `produce`: `count` records keyed `key-<i % keys>` whose value is the
// per-key sequence number.
struct ProduceOptions {
  std::string bootstrap;
  std::string topic;
  int64_t count = 0;
  int32_t keys = 1;
  // Keys are key_prefix + (i % keys).
  std::string key_prefix = "key-";
  // Partition of record i is (i % keys) % partitions; librdkafka's default
  // partitioner when unset.
  std::optional<int32_t> partitions;
  absl::Duration timeout = absl::Seconds(60);  // for all delivery reports
  // Record i gets timestamp timestamp_start_ms + i * timestamp_step_ms (ms
  // since the epoch; every one must be > 0, 0 meaning "now" to librdkafka).
  // Unset: librdkafka stamps records with the current time.
  std::optional<int64_t> timestamp_start_ms;
  int64_t timestamp_step_ms = 0;
  // Headers added to every record, in order ("k=v" flags split at the first
  // '='; a name may repeat).
  std::vector<std::pair<std::string, std::string>> headers;
};
int RunProduce(const ProduceOptions& options);

// `create-topic`: Admin API CreateTopics, then waits until every partition
// has a leader.
struct CreateTopicOptions {
  std::string bootstrap;
  std::string topic;
  int32_t partitions = 0;
  int16_t replication_factor = 1;
  absl::Duration timeout = absl::Seconds(30);
};
int RunCreateTopic(const CreateTopicOptions& options);

// `offsets-for-time`: per partition, the first offset whose timestamp is
// >= timestamp_ms (-1 when none is), one `partition=<p> offset=<o>` line each.
struct OffsetsForTimeOptions {
  std::string bootstrap;
  std::string topic;
  std::optional<int64_t> timestamp_ms;
};
int RunOffsetsForTime(const OffsetsForTimeOptions& options);

// `offsets` and `wait-committed`: committed vs end offsets of a group.
struct OffsetsOptions {
  std::string bootstrap;
  std::string topic;
  std::string group;
};
int RunOffsets(const OffsetsOptions& options);

struct WaitCommittedOptions {
  OffsetsOptions offsets;
  absl::Duration timeout = absl::Seconds(60);
  absl::Duration poll_interval = absl::Milliseconds(500);
};
int RunWaitCommitted(const WaitCommittedOptions& options);

}  // namespace ferry::test_tools

#endif  // FERRY_TESTS_TOOLS_KAFKA_TOOL_COMMANDS_H_
