// Routing by event type, end to end (the ferry binary, example workers and
// librdkafka's mock cluster):
//   * two processors for two event types: each worker sees only the records
//     of its type (checked against the records read back from the topic);
//   * a type no processor handles, known only at run time, is a terminal
//     failure by `on_failure` (here: the dead-letter topic), never a drop;
//   * a type known at startup (`type: const:X`) with no processor stops
//     ferry before it touches Kafka.
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// `count` records over `keys` keys with header type=`type`.
absl::Status ProduceTyped(const std::string& bootstrap, const std::string& topic, int count,
                          int keys, int partitions, const std::string& type) {
  absl::StatusOr<Subprocess> producer = Subprocess::Start(
      {"tests/tools/kafka_tool", "produce", absl::StrCat("--bootstrap=", bootstrap),
       absl::StrCat("--topic=", topic), absl::StrCat("--count=", count),
       absl::StrCat("--keys=", keys), absl::StrCat("--partitions=", partitions),
       absl::StrCat("--headers=type=", type)},
      TempPath(absl::StrCat("produce-", topic, "-", type, ".log")));
  if (!producer.ok()) return producer.status();
  absl::StatusOr<int> exit = producer->Wait(absl::Seconds(120));
  if (!exit.ok()) return exit.status();
  if (*exit != 0) return absl::InternalError("produce failed:\n" + producer->Log());
  return absl::OkStatus();
}

TEST(RoutingTest, EachProcessorSeesOnlyItsTypesAndUnknownTypesAreDeadLettered) {
  constexpr int kOrders = 300;
  constexpr int kRefunds = 200;
  constexpr int kMystery = 40;
  constexpr int kPartitions = 4;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("typed,typed-dlq", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(ProduceTyped(cluster->bootstrap, "typed", kOrders, 20, kPartitions, "order").ok());
  ASSERT_TRUE(ProduceTyped(cluster->bootstrap, "typed", kRefunds, 20, kPartitions, "refund").ok());
  ASSERT_TRUE(ProduceTyped(cluster->bootstrap, "typed", kMystery, 20, kPartitions, "mystery").ok());
  absl::StatusOr<Worker> orders = StartWorker("orders", 16);
  absl::StatusOr<Worker> refunds = StartWorker("refunds", 16);
  ASSERT_TRUE(orders.ok()) << orders.status();
  ASSERT_TRUE(refunds.ok()) << refunds.status();

  const std::string config = absl::StrCat(
      "kafka:\n"
      "  bootstrap.servers: ", cluster->bootstrap, "\n",
      "  group.id: routing-group\n"
      "  session.timeout.ms: 6000\n"
      "  heartbeat.interval.ms: 500\n"
      "topics:\n"
      "  - name: typed\n"
      "    type: header:type\n"
      "processors:\n"
      "  - name: orders\n"
      "    target: ipv4:127.0.0.1:", orders->port, "\n",
      "    event_types: [order]\n"
      "  - name: refunds\n"
      "    target: ipv4:127.0.0.1:", refunds->port, "\n",
      "    event_types: [refund]\n"
      "failures:\n"
      "  dead_letter_topic: typed-dlq\n"
      "server:\n"
      "  listen: 127.0.0.1:0\n"
      "commit:\n"
      "  interval: 200ms\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-routing");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, "typed", "routing-group", kOrders + kRefunds + kMystery,
                       *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);
  ASSERT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  for (Worker* worker : {&*orders, &*refunds}) {
    ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);
  }

  // The type of every record, from the topic itself.
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> records =
      test_tools::ReadTopic(cluster->bootstrap, "typed");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), static_cast<size_t>(kOrders + kRefunds + kMystery));
  std::map<std::pair<int32_t, int64_t>, std::string> type_of;
  for (const test_tools::ConsumedRecord& record : *records) {
    type_of[{record.partition, record.offset}] = record.Header("type");
  }

  // Each worker handled exactly the records of its type, each once.
  for (const auto& [worker, type, expected] :
       {std::make_tuple(&*orders, std::string("order"), kOrders),
        std::make_tuple(&*refunds, std::string("refund"), kRefunds)}) {
    absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
    ASSERT_TRUE(handled.ok()) << handled.status();
    std::map<std::pair<int32_t, int64_t>, int> seen;
    for (const HandledEvent& event : *handled) {
      const std::pair<int32_t, int64_t> at{event.partition, event.offset};
      ASSERT_EQ(type_of.count(at), 1u) << event.partition << "@" << event.offset;
      EXPECT_EQ(type_of[at], type) << "worker of " << type << " got " << type_of[at] << " at "
                                   << event.partition << "@" << event.offset;
      ++seen[at];
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(expected)) << type;
    for (const auto& [at, times] : seen) EXPECT_EQ(times, 1);
  }

  // The type nobody handles went to the dead-letter topic, every record of it.
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster->bootstrap, "typed-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), static_cast<size_t>(kMystery));
  for (const test_tools::ConsumedRecord& letter : *dead) {
    EXPECT_THAT(letter.Header("ferry.error"),
                HasSubstr("no processor handles event type \"mystery\""));
    EXPECT_EQ(letter.Header("type"), "mystery");
  }
}

TEST(RoutingTest, ATypeKnownAtStartupWithNoProcessorStopsFerry) {
  // No broker is needed: the config is refused before ferry connects.
  absl::StatusOr<Subprocess> ferry = StartFerry(
      "kafka:\n"
      "  bootstrap.servers: 127.0.0.1:1\n"
      "topics:\n"
      "  - name: clicks\n"
      "    type: const:click\n"
      "processors:\n"
      "  - name: orders\n"
      "    target: ipv4:127.0.0.1:1\n"
      "    event_types: [order]\n",
      "ferry-unroutable");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  EXPECT_EQ(ferry->Wait(absl::Seconds(30)).value_or(-1), 2) << ferry->Log();
  EXPECT_THAT(ferry->Log(), HasSubstr("ferry-unroutable.yaml:5: topics[0].type: every record of "
                                      "topic \"clicks\" has event type \"click\", which no "
                                      "processor handles"));
}

}  // namespace
}  // namespace ferry::testing
