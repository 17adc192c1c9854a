// End to end, through real processes and sockets: librdkafka's mock cluster
// (kafka_tool mock), the ferry binary and two example worker processes, one
// of which grants credit 1. 100,000 events over 8 partitions and 1,000 keys.
//
// Checks: every event acked; the group's committed offsets, read back by a
// separate consumer, equal the end offsets; per-key processing order across
// both workers (by CLOCK_MONOTONIC, shared by all processes) equals produce
// order; the credit-1 worker never held more than one event on a stream.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

constexpr int kEvents = 100000;
constexpr int kKeys = 1000;
constexpr int kPartitions = 8;
constexpr char kTopic[] = "events";
constexpr char kGroup[] = "ferry-e2e";

struct Seen {
  int64_t monotonic_ns = 0;
  int64_t sequence = 0;
};

// Lines: key \t payload(sequence) \t monotonic_ns \t partition \t offset.
void ReadRecord(const std::string& path, std::map<std::string, std::vector<Seen>>* by_key,
                int64_t* lines) {
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    ASSERT_GE(fields.size(), 3u) << line;
    Seen seen;
    ASSERT_TRUE(absl::SimpleAtoi(fields[1], &seen.sequence)) << line;
    ASSERT_TRUE(absl::SimpleAtoi(fields[2], &seen.monotonic_ns)) << line;
    (*by_key)[std::string(fields[0])].push_back(seen);
    ++*lines;
  }
}

void PrintLogTail(const Subprocess& process) {
  const std::string log = process.Log();
  std::cerr << "---- " << process.log_path() << " (tail) ----\n"
            << log.substr(log.size() > 6000 ? log.size() - 6000 : 0) << "\n";
}

TEST(EndToEndTest, HundredThousandEventsAckedCommittedAndOrderedPerKey) {
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, kKeys, kPartitions).ok());

  absl::StatusOr<Worker> worker_a = StartWorker("a", /*max_in_flight=*/64);
  absl::StatusOr<Worker> worker_b = StartWorker("b", /*max_in_flight=*/1);
  ASSERT_TRUE(worker_a.ok()) << worker_a.status();
  ASSERT_TRUE(worker_b.ok()) << worker_b.status();

  // One round-robin channel over both workers' addresses.
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, kGroup, kTopic,
                  absl::StrCat("ipv4:127.0.0.1:", worker_a->port, ",127.0.0.1:", worker_b->port),
                  /*streams=*/8, "lanes:\n  count: 256\n"),
      "ferry");
  ASSERT_TRUE(ferry.ok()) << ferry.status();

  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, kTopic, kGroup, kEvents, *ferry, absl::Seconds(180));
  if (!progress.ok()) PrintLogTail(*ferry);
  ASSERT_TRUE(progress.ok()) << progress.status();

  // ferry serves the gRPC health service.
  const int health_port = FerryHealthPort(ferry->Log());
  ASSERT_GT(health_port, 0) << ferry->Log();
  absl::StatusOr<bool> serving = IsServing(health_port);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);

  // Graceful stop of everything: exit code 0 each.
  ferry->Signal(SIGTERM);
  absl::StatusOr<int> ferry_exit = ferry->Wait(absl::Seconds(60));
  ASSERT_TRUE(ferry_exit.ok()) << ferry_exit.status();
  EXPECT_EQ(*ferry_exit, 0) << ferry->Log();
  for (Worker* worker : {&*worker_a, &*worker_b}) {
    worker->process.Signal(SIGTERM);
    absl::StatusOr<int> exit = worker->process.Wait(absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0);
  }

  // Committed == end for every partition, read back independently.
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(cluster->bootstrap, kTopic, kGroup);
  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(cluster->bootstrap, kTopic);
  ASSERT_TRUE(committed.ok() && end.ok());
  ASSERT_EQ(end->size(), static_cast<size_t>(kPartitions));
  int64_t total = 0;
  for (const auto& [partition, end_offset] : *end) {
    EXPECT_EQ(committed->at(partition), end_offset) << "partition " << partition;
    total += end_offset;
  }
  EXPECT_EQ(total, kEvents);

  // Every event was handled once; per-key order equals produce order.
  std::map<std::string, std::vector<Seen>> by_key;
  int64_t lines = 0;
  ReadRecord(worker_a->record_path, &by_key, &lines);
  ReadRecord(worker_b->record_path, &by_key, &lines);
  EXPECT_EQ(lines, kEvents) << "each event exactly once on the happy path";
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  for (auto& [key, seen] : by_key) {
    std::stable_sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) {
      return a.monotonic_ns < b.monotonic_ns;
    });
    for (size_t i = 0; i < seen.size(); ++i) {
      ASSERT_EQ(seen[i].sequence, static_cast<int64_t>(i)) << "key " << key;
    }
  }

  // Both workers took part; the credit-1 worker never held two events.
  const std::map<std::string, int64_t> stats_a = ReadStats(worker_a->stats_path);
  const std::map<std::string, int64_t> stats_b = ReadStats(worker_b->stats_path);
  EXPECT_GT(stats_a.at("events_received"), 0);
  EXPECT_GT(stats_b.at("events_received"), 0);
  EXPECT_EQ(stats_b.at("max_held"), 1);
  EXPECT_EQ(stats_a.at("credit_violations"), 0);
  EXPECT_EQ(stats_b.at("credit_violations"), 0);
  EXPECT_EQ(stats_a.at("events_received") + stats_b.at("events_received"), kEvents);
}

// A worker killed mid-stream: its in-flight events are redelivered after it
// comes back on the same address (ferry reconnects with backoff), and every
// offset is still committed.
TEST(EndToEndTest, WorkerKilledMidStreamIsReconnectedAndNothingIsLost) {
  constexpr int kRestartEvents = 5000;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("restart", 4);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "restart", kRestartEvents, 100, 4).ok());

  // Slow enough (5 ms per event, credit 8) that events are in flight when killed.
  absl::StatusOr<Worker> worker = StartWorker("slow", 8, 0, {"--work_us=5000"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const int port = worker->port;
  absl::StatusOr<Subprocess> ferry =
      StartFerry(FerryConfig(cluster->bootstrap, "restart-group", "restart",
                             absl::StrCat("ipv4:127.0.0.1:", port), /*streams=*/2),
                 "ferry-restart");
  ASSERT_TRUE(ferry.ok()) << ferry.status();

  // Wait until the worker has handled some events, then kill it hard.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (LastProgressValue(ferry->Log(), "acked") <= 0) {
    ASSERT_LT(absl::Now(), deadline) << ferry->Log();
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's progress log
  }
  worker->process.Signal(SIGKILL);
  ASSERT_TRUE(worker->process.Wait(absl::Seconds(10)).ok());

  absl::StatusOr<Worker> restarted = StartWorker("slow-again", 64, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "restart", "restart-group", kRestartEvents, *ferry, absl::Seconds(120));
  if (!progress.ok()) PrintLogTail(*ferry);
  ASSERT_TRUE(progress.ok()) << progress.status();

  ferry->Signal(SIGTERM);
  ASSERT_EQ(ferry->Wait(absl::Seconds(60)).value_or(-1), 0);
  // The kill caught events in flight, and they were delivered again.
  EXPECT_GT(LastProgressValue(ferry->Log(), "redelivered"), 0) << ferry->Log();
  EXPECT_EQ(LastProgressValue(ferry->Log(), "acked"), kRestartEvents);
}

// Backpressure: with a budget of 500 buffered events and a backlog of 3,000,
// ferry pauses fetching instead of buffering the backlog, and still finishes.
TEST(EndToEndTest, BufferedEventsStayWithinTheBudget) {
  constexpr int kBacklog = 3000;
  constexpr int kBudget = 500;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("backlog", 8);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "backlog", kBacklog, 500, 8).ok());
  // Slow enough (4 threads x 2 ms) that a full buffer takes ~250 ms to drain,
  // so the 100 ms progress lines see it; librdkafka needs up to ~0.5-1 s to
  // fetch again after a resume.
  absl::StatusOr<Worker> worker = StartWorker("budget", 64, 0, {"--work_us=2000"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, "budget-group", "backlog",
                  absl::StrCat("ipv4:127.0.0.1:", worker->port), /*streams=*/2,
                  absl::StrCat("budgets:\n  max_buffered_events: ", kBudget,
                               "\n  resume_fraction: 0.5\n"),
                  /*progress_interval=*/"100ms"),
      "ferry-budget");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "backlog", "budget-group", kBacklog, *ferry, absl::Seconds(120));
  if (!progress.ok()) PrintLogTail(*ferry);
  ASSERT_TRUE(progress.ok()) << progress.status();
  ferry->Signal(SIGTERM);
  ASSERT_EQ(ferry->Wait(absl::Seconds(60)).value_or(-1), 0);

  // Every progress line (one per 100ms) reports buffered events.
  int64_t most_buffered = 0;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(ferry->Log(), '\n')) {
    if (line.find("progress:") == absl::string_view::npos) continue;
    const int64_t buffered = LastProgressValue(std::string(line), "buffered");
    ASSERT_GE(buffered, 0) << line;
    most_buffered = std::max(most_buffered, buffered);
    ++lines;
  }
  EXPECT_GE(lines, 5);
  EXPECT_GT(most_buffered, 0);
  // The poll that crosses the budget may hand over one more record.
  EXPECT_LE(most_buffered, kBudget + 1);
}

}  // namespace
}  // namespace ferry::testing
