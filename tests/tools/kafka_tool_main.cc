// kafka_tool: Kafka helpers for ferry's tests and developer scripts.
//
//   kafka_tool mock --partitions 8 --topics events[,more] --bootstrap_file F
//   kafka_tool produce --bootstrap B --topic T --count N --keys K [--partitions P]
//   kafka_tool offsets --bootstrap B --topic T --group G
//   kafka_tool wait-committed --bootstrap B --topic T --group G --timeout 60s
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "tests/tools/kafka_tool_commands.h"

ABSL_FLAG(std::string, bootstrap, "",
          "produce/offsets/wait-committed: bootstrap servers (host:port,...)");
ABSL_FLAG(std::string, topic, "", "produce/offsets/wait-committed: topic");
ABSL_FLAG(std::vector<std::string>, topics, {},
          "mock: topics to create (comma-separated)");
ABSL_FLAG(std::string, group, "", "offsets/wait-committed: consumer group id");
ABSL_FLAG(std::optional<int32_t>, partitions, std::nullopt,
          "mock: partitions per created topic (default 4); produce: send key "
          "index k to partition k % partitions (default: librdkafka's "
          "partitioner)");
ABSL_FLAG(int64_t, count, 0, "produce: number of records");
ABSL_FLAG(int32_t, keys, 1, "produce: number of distinct keys (key-<i % keys>)");
ABSL_FLAG(std::string, bootstrap_file, "",
          "mock: write the bootstrap servers to this file (atomically)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60),
          "wait-committed: give up after this long; produce: wait this long "
          "for delivery reports");
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
    "  wait-committed  wait until a group committed every end offset\n";

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
    return RunMock(o);
  }
  if (command == "produce") {
    ProduceOptions o;
    o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
    o.topic = absl::GetFlag(FLAGS_topic);
    o.count = absl::GetFlag(FLAGS_count);
    o.keys = absl::GetFlag(FLAGS_keys);
    o.partitions = absl::GetFlag(FLAGS_partitions);
    o.timeout = absl::GetFlag(FLAGS_timeout);
    return RunProduce(o);
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
