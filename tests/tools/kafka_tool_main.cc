// kafka_tool: Kafka helpers for ferry's tests and developer scripts.
//
//   kafka_tool mock --partitions 8 --topics events[,more] --bootstrap_file F
//                   [--group_initial_rebalance_delay_ms 0]
//   kafka_tool produce --bootstrap B --topic T --count N --keys K [--partitions P]
//                      [--timestamp_start_ms T --timestamp_step_ms S]
//                      [--headers k1=v1,k2=v2] [--key_prefix P]
//   kafka_tool offsets --bootstrap B --topic T --group G
//   kafka_tool wait-committed --bootstrap B --topic T --group G --timeout 60s
//   kafka_tool create-topic --bootstrap B --topic T --partitions P
//                           [--replication_factor R] [--timeout 60s]
//   kafka_tool offsets-for-time --bootstrap B --topic T --timestamp_ms MS
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "tests/tools/kafka_tool_commands.h"

ABSL_FLAG(std::string, bootstrap, "",
          "produce/offsets/wait-committed/create-topic/offsets-for-time: "
          "bootstrap servers (host:port,...)");
ABSL_FLAG(std::string, topic, "",
          "produce/offsets/wait-committed/create-topic/offsets-for-time: topic");
ABSL_FLAG(std::vector<std::string>, topics, {},
          "mock: topics to create (comma-separated)");
ABSL_FLAG(std::string, group, "", "offsets/wait-committed: consumer group id");
ABSL_FLAG(std::optional<int32_t>, partitions, std::nullopt,
          "mock: partitions per created topic (default 4); produce: send key "
          "index k to partition k % partitions (default: librdkafka's "
          "partitioner); create-topic: partitions of the new topic "
          "(required)");
ABSL_FLAG(int64_t, count, 0, "produce: number of records");
ABSL_FLAG(int32_t, keys, 1, "produce: number of distinct keys (key-<i % keys>)");
ABSL_FLAG(std::string, key_prefix, "key-",
          "produce: keys are <key_prefix><i % keys>");
ABSL_FLAG(std::string, bootstrap_file, "",
          "mock: write the bootstrap servers to this file (atomically)");
ABSL_FLAG(int32_t, group_initial_rebalance_delay_ms, 0,
          "mock: the broker's group.initial.rebalance.delay.ms, how long the "
          "first member of an empty group waits for others (Kafka's and "
          "librdkafka's mock default: 3000; 0 here, as in tests/kafka's "
          "broker)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60),
          "wait-committed: give up after this long; produce: wait this long "
          "for delivery reports; create-topic: give up after this long");
ABSL_FLAG(std::optional<int64_t>, timestamp_start_ms, std::nullopt,
          "produce: record i gets timestamp timestamp_start_ms + i * "
          "timestamp_step_ms (ms since the epoch; default: the current time)");
ABSL_FLAG(int64_t, timestamp_step_ms, 0,
          "produce: see --timestamp_start_ms (may be negative)");
ABSL_FLAG(std::vector<std::string>, headers, {},
          "produce: headers added to every record, name=value,... (split at "
          "the first '=')");
ABSL_FLAG(int32_t, replication_factor, 1,
          "create-topic: replication factor of the new topic");
ABSL_FLAG(std::optional<int64_t>, timestamp_ms, std::nullopt,
          "offsets-for-time: the timestamp (ms since the epoch) to look up");
ABSL_FLAG(absl::Duration, poll_interval, absl::Milliseconds(500),
          "wait-committed: time between polls");

namespace ferry::test_tools {
namespace {

constexpr char kUsage[] =
    "kafka_tool <command> [flags]\n"
    "commands:\n"
    "  mock            run a librdkafka mock cluster until SIGTERM/SIGINT\n"
    "  produce         produce keyed records with per-key sequence values\n"
    "  offsets         print committed vs end offsets of a group\n"
    "  wait-committed  wait until a group committed every end offset\n"
    "  create-topic    create a topic (Admin API) and wait until it is usable\n"
    "  offsets-for-time  per partition, the first offset at or after a "
    "timestamp\n";

OffsetsOptions OffsetsFromFlags() {
  OffsetsOptions o;
  o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
  o.topic = absl::GetFlag(FLAGS_topic);
  o.group = absl::GetFlag(FLAGS_group);
  return o;
}

int Dispatch(const std::string& command) {
  if (command == "mock") {
    MockOptions o;
    o.topics = absl::GetFlag(FLAGS_topics);
    o.partitions = absl::GetFlag(FLAGS_partitions).value_or(4);
    o.bootstrap_file = absl::GetFlag(FLAGS_bootstrap_file);
    o.group_initial_rebalance_delay_ms =
        absl::GetFlag(FLAGS_group_initial_rebalance_delay_ms);
    return RunMock(o);
  }
  if (command == "produce") {
    ProduceOptions o;
    o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
    o.topic = absl::GetFlag(FLAGS_topic);
    o.count = absl::GetFlag(FLAGS_count);
    o.keys = absl::GetFlag(FLAGS_keys);
    o.key_prefix = absl::GetFlag(FLAGS_key_prefix);
    o.partitions = absl::GetFlag(FLAGS_partitions);
    o.timeout = absl::GetFlag(FLAGS_timeout);
    o.timestamp_start_ms = absl::GetFlag(FLAGS_timestamp_start_ms);
    o.timestamp_step_ms = absl::GetFlag(FLAGS_timestamp_step_ms);
    for (const std::string& header : absl::GetFlag(FLAGS_headers)) {
      const size_t eq = header.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "produce: --headers: '%s' is not name=value\n",
                     header.c_str());
        return kExitUsage;
      }
      o.headers.emplace_back(header.substr(0, eq), header.substr(eq + 1));
    }
    return RunProduce(o);
  }
  if (command == "create-topic") {
    CreateTopicOptions o;
    o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
    o.topic = absl::GetFlag(FLAGS_topic);
    o.partitions = absl::GetFlag(FLAGS_partitions).value_or(0);
    const int32_t replication_factor = absl::GetFlag(FLAGS_replication_factor);
    if (replication_factor < 1 ||
        replication_factor > std::numeric_limits<int16_t>::max()) {
      std::fprintf(stderr, "create-topic: --replication_factor out of range\n");
      return kExitUsage;
    }
    o.replication_factor = static_cast<int16_t>(replication_factor);
    o.timeout = absl::GetFlag(FLAGS_timeout);
    return RunCreateTopic(o);
  }
  if (command == "offsets-for-time") {
    OffsetsForTimeOptions o;
    o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
    o.topic = absl::GetFlag(FLAGS_topic);
    o.timestamp_ms = absl::GetFlag(FLAGS_timestamp_ms);
    return RunOffsetsForTime(o);
  }
  if (command == "offsets") return RunOffsets(OffsetsFromFlags());
  if (command == "wait-committed") {
    WaitCommittedOptions o;
    o.offsets = OffsetsFromFlags();
    o.timeout = absl::GetFlag(FLAGS_timeout);
    o.poll_interval = absl::GetFlag(FLAGS_poll_interval);
    return RunWaitCommitted(o);
  }
  std::fprintf(stderr, "kafka_tool: unknown command '%s'\n%s",
               command.c_str(), kUsage);
  return kExitUsage;
}

}  // namespace
}  // namespace ferry::test_tools

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(ferry::test_tools::kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "%s", ferry::test_tools::kUsage);
    return ferry::test_tools::kExitUsage;
  }
  return ferry::test_tools::Dispatch(args[1]);
}
