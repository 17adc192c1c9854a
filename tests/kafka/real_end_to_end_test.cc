// The foundation end-to-end test (tests/e2e/end_to_end_test.cc) on a real
// Apache Kafka broker instead of librdkafka's mock cluster: the ferry binary
// and two example worker processes (one granting credit 1) behind one
// round-robin target with 8 streams; 100,000 events over 8 partitions and
// 1,000 keys, produced before ferry starts.
//
// Checks: every event acked exactly once (nothing is disturbed, so nothing
// is redelivered); the group's committed offsets, read back by a separate
// client, equal the end offsets; per-key processing order across both
// workers (by CLOCK_MONOTONIC at handler start, shared by all processes)
// equals produce order; the credit-1 worker never held more than one event;
// ferry stops on SIGTERM with exit 0.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"

namespace ferry::testing {
namespace {

const ::testing::Environment* const kBroker =
    ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("real_end_to_end_test"));

constexpr int kEvents = 100000;
constexpr int kKeys = 1000;
constexpr int kPartitions = 8;
constexpr char kTopic[] = "events";
constexpr char kGroup[] = "ferry-real-e2e";

using RealEndToEndTest = RealKafkaTest;

TEST_F(RealEndToEndTest, HundredThousandEventsAckedCommittedAndOrderedPerKey) {
  const absl::Time test_start = absl::Now();
  ASSERT_TRUE(broker().CreateTopic(kTopic, kPartitions).ok());
  ASSERT_TRUE(Produce(bootstrap(), kTopic, kEvents, kKeys, kPartitions).ok());
  const absl::Time produced = absl::Now();

  absl::StatusOr<Worker> worker_a = StartWorker("a", /*max_in_flight=*/64);
  absl::StatusOr<Worker> worker_b = StartWorker("b", /*max_in_flight=*/1);
  ASSERT_TRUE(worker_a.ok()) << worker_a.status();
  ASSERT_TRUE(worker_b.ok()) << worker_b.status();

  // One round-robin channel over both workers' addresses.
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(bootstrap(), kGroup, kTopic,
                  absl::StrCat("ipv4:127.0.0.1:", worker_a->port, ",127.0.0.1:", worker_b->port),
                  /*streams=*/8, "lanes:\n  count: 256\n"),
      "ferry");
  ASSERT_TRUE(ferry.ok()) << ferry.status();

  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, kEvents, *ferry, absl::Seconds(180));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  const absl::Time committed_all = absl::Now();

  // ferry serves the gRPC health service.
  const int health_port = FerryHealthPort(ferry->Log());
  ASSERT_GT(health_port, 0) << ferry->Log();
  absl::StatusOr<bool> serving = IsServing(health_port);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);

  // Graceful stop of everything: exit code 0 each.
  absl::StatusOr<int> ferry_exit = Terminate(*ferry, absl::Seconds(60));
  ASSERT_TRUE(ferry_exit.ok()) << ferry_exit.status() << "\n" << LogTail(*ferry);
  EXPECT_EQ(*ferry_exit, 0) << LogTail(*ferry);
  for (Worker* worker : {&*worker_a, &*worker_b}) {
    absl::StatusOr<int> exit = Terminate(worker->process, absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0) << LogTail(worker->process);
  }
  // The final progress line (written at shutdown) counts every event once.
  const std::string log = ferry->Log();
  EXPECT_EQ(LastProgressValue(log, "consumed"), kEvents) << LogTail(*ferry);
  EXPECT_EQ(LastProgressValue(log, "acked"), kEvents) << LogTail(*ferry);
  EXPECT_EQ(LastProgressValue(log, "failed"), 0);
  EXPECT_EQ(LastProgressValue(log, "redelivered"), 0);

  // Committed == end for every partition, read back independently.
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(bootstrap(), kTopic, kGroup);
  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(bootstrap(), kTopic);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE(end.ok()) << end.status();
  ASSERT_EQ(end->size(), static_cast<size_t>(kPartitions));
  int64_t total = 0;
  for (const auto& [partition, end_offset] : *end) {
    EXPECT_EQ(committed->at(partition), end_offset) << "partition " << partition;
    total += end_offset;
  }
  EXPECT_EQ(total, kEvents);

  // Every event was handled once; per-key order equals produce order.
  std::map<std::string, std::vector<HandledEvent>> by_key;
  int64_t lines = 0;
  for (const Worker* worker : {&*worker_a, &*worker_b}) {
    absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
    ASSERT_TRUE(handled.ok()) << handled.status();
    for (HandledEvent& event : *handled) {
      EXPECT_TRUE(event.answer.empty() || event.answer == "OK") << event.answer;
      by_key[event.key].push_back(std::move(event));
      ++lines;
    }
  }
  EXPECT_EQ(lines, kEvents) << "each event exactly once on the happy path";
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  for (auto& [key, seen] : by_key) {
    int key_index = -1;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripPrefix(key, "key-"), &key_index)) << key;
    std::stable_sort(seen.begin(), seen.end(), [](const HandledEvent& a, const HandledEvent& b) {
      return a.monotonic_ns < b.monotonic_ns;
    });
    ASSERT_EQ(seen.size(), static_cast<size_t>(kEvents / kKeys)) << "key " << key;
    for (size_t i = 0; i < seen.size(); ++i) {
      ASSERT_EQ(seen[i].sequence, static_cast<int64_t>(i)) << "key " << key;
      // kafka_tool pins key-i to partition (i % keys) % partitions.
      ASSERT_EQ(seen[i].partition, key_index % kPartitions) << "key " << key;
    }
  }

  // Both workers took part; the credit-1 worker never held two events.
  const std::map<std::string, int64_t> stats_a = ReadStats(worker_a->stats_path);
  const std::map<std::string, int64_t> stats_b = ReadStats(worker_b->stats_path);
  ASSERT_TRUE(stats_a.count("events_received") && stats_b.count("events_received"));
  EXPECT_GT(stats_a.at("events_received"), 0);
  EXPECT_GT(stats_b.at("events_received"), 0);
  EXPECT_EQ(stats_b.at("max_held"), 1);
  EXPECT_EQ(stats_a.at("credit_violations"), 0);
  EXPECT_EQ(stats_b.at("credit_violations"), 0);
  EXPECT_EQ(stats_a.at("events_received") + stats_b.at("events_received"), kEvents);

  std::cout << "real_end_to_end_test: produce " << absl::FormatDuration(produced - test_start)
            << ", ferry to all committed " << absl::FormatDuration(committed_all - produced)
            << "; worker a handled " << stats_a.at("events_received") << ", worker b (credit 1) "
            << stats_b.at("events_received") << std::endl;
  RecordProperty("worker_a_events", static_cast<int>(stats_a.at("events_received")));
  RecordProperty("worker_b_events", static_cast<int>(stats_b.at("events_received")));
}

}  // namespace
}  // namespace ferry::testing
