// Delayed processing on a real Apache Kafka broker (topics[].delay):
//   * no event reaches a worker before its record timestamp + delay, where
//     the timestamp is the broker's own (the topic uses LogAppendTime) as
//     read back from the topic, and the handler start comes from the
//     worker's --record file;
//   * a full delay stage (budgets.max_delayed_events) pauses fetching: with
//     a backlog of records that are not due yet, ferry holds no more than the
//     stage's capacity instead of reading the backlog into memory, and still
//     finishes everything once the records fall due.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

const ::testing::Environment* const kBroker =
    ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("delay_test"));

using DelayTest = RealKafkaTest;

int64_t ClockNanos(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC now (the worker records handler starts on
// the monotonic clock, shared by every process of the machine).
int64_t RealtimeMinusMonotonicNanos() {
  int64_t best = 0;
  int64_t narrowest = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const int64_t before = ClockNanos(CLOCK_MONOTONIC);
    const int64_t real = ClockNanos(CLOCK_REALTIME);
    const int64_t after = ClockNanos(CLOCK_MONOTONIC);
    if (after - before < narrowest) {
      narrowest = after - before;
      best = real - (before + (after - before) / 2);
    }
  }
  return best;
}

// FerryConfig with `topic_lines` under the topic (after its `ordering:`).
std::string DelayedConfig(const std::string& bootstrap, const std::string& group,
                          const std::string& topic, const std::string& target,
                          const std::string& topic_lines, const std::string& extra,
                          const std::string& progress_interval) {
  std::string config =
      FerryConfig(bootstrap, group, topic, target, /*streams=*/2, extra, progress_interval);
  const std::string anchor = "    ordering: key\n";
  config.insert(config.find(anchor) + anchor.size(), topic_lines);
  return config;
}

absl::Status WaitForAssignment(Subprocess& ferry, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ferry.Log().find("consumer: assigned: ") != std::string::npos) return absl::OkStatus();
    if (ferry.TryWait().has_value()) return absl::InternalError("ferry exited:\n" + ferry.Log());
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's log
  }
  return absl::DeadlineExceededError("ferry was not assigned partitions:\n" + ferry.Log());
}

TEST_F(DelayTest, NoEventIsDispatchedBeforeItsBrokerTimestampPlusTheDelay) {
  constexpr char kTopic[] = "delayed";
  constexpr char kGroup[] = "delay-group";
  constexpr int kPartitions = 2;
  constexpr int kBatch = 100;
  constexpr int64_t kDelayMs = 2000;
  // The broker stamps every record when it appends it.
  ASSERT_TRUE(test_tools::CreateTopic(bootstrap(), kTopic, kPartitions, 1,
                                      {{"message.timestamp.type", "LogAppendTime"}})
                  .ok());
  absl::StatusOr<Worker> worker = StartWorker("delayed", 64);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      DelayedConfig(bootstrap(), kGroup, kTopic, absl::StrCat("ipv4:127.0.0.1:", worker->port),
                    absl::StrCat("    delay: ", kDelayMs, "ms\n"), "", "1s"),
      "ferry-delayed");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ASSERT_TRUE(WaitForAssignment(*ferry, absl::Seconds(30)).ok()) << LogTail(*ferry);
  // Two batches 700 ms apart: two sets of broker timestamps.
  ASSERT_TRUE(Produce(bootstrap(), kTopic, kBatch, 10, kPartitions).ok());
  absl::SleepFor(absl::Milliseconds(700));
  ASSERT_TRUE(Produce(bootstrap(), kTopic, kBatch, 10, kPartitions).ok());
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, 2 * kBatch, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);
  ASSERT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);
  const int64_t clock_offset_ns = RealtimeMinusMonotonicNanos();

  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> records =
      test_tools::ReadTopic(bootstrap(), kTopic);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), static_cast<size_t>(2 * kBatch));
  std::map<std::pair<int32_t, int64_t>, int64_t> timestamp_ms;
  for (const test_tools::ConsumedRecord& record : *records) {
    ASSERT_GT(record.timestamp_ms, 0);
    timestamp_ms[{record.partition, record.offset}] = record.timestamp_ms;
  }
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  ASSERT_EQ(handled->size(), static_cast<size_t>(2 * kBatch));
  // Handler start (wall clock) minus (broker timestamp + delay), per event.
  // The monotonic-to-wall conversion is good to well under a millisecond on
  // one machine; 5 ms of slack covers any clock slewing during the test.
  std::vector<int64_t> after_due_ms;
  for (const HandledEvent& event : *handled) {
    auto stamp = timestamp_ms.find({event.partition, event.offset});
    ASSERT_NE(stamp, timestamp_ms.end()) << event.partition << "@" << event.offset;
    const double started_ms = (event.monotonic_ns + clock_offset_ns) / 1e6;
    const double early_ms = (stamp->second + kDelayMs) - started_ms;
    EXPECT_LT(early_ms, 5) << "partition " << event.partition << " offset " << event.offset
                           << " started " << early_ms << " ms before timestamp + delay";
    after_due_ms.push_back(static_cast<int64_t>(-early_ms));
  }
  std::sort(after_due_ms.begin(), after_due_ms.end());
  // Not held needlessly long either (the stage is checked every 20 ms).
  EXPECT_LT(after_due_ms.back(), 3000);
  std::cout << "delay_test: started after timestamp + " << kDelayMs << " ms by min "
            << after_due_ms.front() << " ms, median " << after_due_ms[after_due_ms.size() / 2]
            << " ms, max " << after_due_ms.back() << " ms" << std::endl;
}

TEST_F(DelayTest, AFullDelayStagePausesFetchingInsteadOfBufferingTheBacklog) {
  constexpr char kTopic[] = "held";
  constexpr char kGroup[] = "held-group";
  constexpr int kPartitions = 4;
  constexpr int kRecords = 1500;
  constexpr int kCapacity = 50;
  ASSERT_TRUE(broker().CreateTopic(kTopic, kPartitions).ok());
  absl::StatusOr<Worker> worker = StartWorker("held", 64);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      DelayedConfig(bootstrap(), kGroup, kTopic, absl::StrCat("ipv4:127.0.0.1:", worker->port),
                    "    delay: 4s\n",
                    absl::StrCat("budgets:\n  max_delayed_events: ", kCapacity, "\n"), "100ms"),
      "ferry-held");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ASSERT_TRUE(WaitForAssignment(*ferry, absl::Seconds(30)).ok()) << LogTail(*ferry);
  const absl::Time produced_at = absl::Now();
  ASSERT_TRUE(Produce(bootstrap(), kTopic, kRecords, 100, kPartitions).ok());
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, kRecords, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);
  const absl::Duration took = absl::Now() - produced_at;
  ASSERT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);

  // Progress lines (every 100 ms): while nothing was due yet (acked=0) ferry
  // held no more than the stage's capacity, although the whole backlog was
  // there to read.
  int64_t most_delayed = 0;
  int64_t most_buffered_waiting = 0;
  int waiting_lines = 0;
  for (absl::string_view line : absl::StrSplit(ferry->Log(), '\n')) {
    if (line.find("progress:") == absl::string_view::npos) continue;
    const std::string text(line);
    const int64_t delayed = LastProgressValue(text, "delayed");
    const int64_t buffered = LastProgressValue(text, "buffered");
    ASSERT_GE(delayed, 0) << line;
    most_delayed = std::max(most_delayed, delayed);
    if (LastProgressValue(text, "acked") == 0 && delayed > 0) {
      ++waiting_lines;
      most_buffered_waiting = std::max(most_buffered_waiting, buffered);
    }
  }
  EXPECT_GE(waiting_lines, 5) << "the records were due before ferry read them?";
  EXPECT_GE(most_delayed, kCapacity) << "the stage never filled";
  // The poll that fills the stage may hand over one more record.
  EXPECT_LE(most_delayed, kCapacity + 1);
  EXPECT_LE(most_buffered_waiting, kCapacity + 1);
  const std::map<std::string, int64_t> stats = ReadStats(worker->stats_path);
  EXPECT_EQ(stats.at("events_received"), kRecords);
  std::cout << "delay_test: " << kRecords << " records through a " << kCapacity
            << "-event delay stage in " << absl::FormatDuration(took) << "; most delayed "
            << most_delayed << ", most buffered while waiting " << most_buffered_waiting
            << std::endl;
}

}  // namespace
}  // namespace ferry::testing
