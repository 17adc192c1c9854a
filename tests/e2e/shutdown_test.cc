// Shutdown end to end (issue 20, items 4, 6 and 12): the ferry binary, the
// mock cluster, example workers.
//   * SIGTERM drains: no new event reaches the worker after the signal
//     beyond what it already had, ferry exits 0 as soon as that work is
//     done (well before the grace period), the group's commits equal exactly
//     what was processed, and the next start delivers the rest.
//   * SIGHUP does the same drain (it does not kill ferry).
//   * ferry on its embedded cluster stops without librdkafka ERROR lines.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kPartitions = 4;
constexpr int kEvents = 200;
constexpr absl::Duration kWork = absl::Seconds(1);

int64_t MonotonicNowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// One stream with credit 4, partition ordering over 4 partitions: at most 4
// events at the worker, each taking kWork.
std::string SlowConfig(const std::string& bootstrap, const std::string& topic, int port) {
  std::string config = FerryConfig(bootstrap, topic + "-group", topic,
                                   absl::StrCat("ipv4:127.0.0.1:", port), /*streams=*/1,
                                   "shutdown:\n  grace: 60s\n", /*progress_interval=*/"100ms");
  config.replace(config.find("ordering: key"), 13, "ordering: partition");
  return config;
}

// Waits until ferry's progress shows at least `acked` finished events.
void WaitForAcked(Subprocess& ferry, int64_t acked) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (LastProgressValue(ferry.Log(), "acked") < acked) {
    ASSERT_LT(absl::Now(), deadline) << LogTail(ferry);
    ASSERT_FALSE(ferry.TryWait().has_value()) << LogTail(ferry);
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's progress log
  }
}

// Sends `signal_number` once the slow worker is busy and checks the drain:
// returns the offsets processed per partition.
std::map<int32_t, std::set<int64_t>> SignalMidRunAndCheckTheDrain(int signal_number,
                                                                  const std::string& topic,
                                                                  const MockCluster& cluster) {
  std::map<int32_t, std::set<int64_t>> processed;
  absl::StatusOr<Worker> worker = StartWorker(
      topic + "-slow", /*max_in_flight=*/4, 0,
      {"--handler_threads=4", absl::StrCat("--work_us=", absl::ToInt64Microseconds(kWork))});
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return processed;
  absl::StatusOr<Subprocess> ferry =
      StartFerry(SlowConfig(cluster.bootstrap, topic, worker->port), "ferry-" + topic);
  EXPECT_TRUE(ferry.ok()) << ferry.status();
  if (!ferry.ok()) return processed;
  WaitForAcked(*ferry, 8);  // two rounds done: the worker is mid-run
  if (::testing::Test::HasFatalFailure()) return processed;

  const int64_t signalled_ns = MonotonicNowNs();
  const absl::Time signalled = absl::Now();
  ferry->Signal(signal_number);
  absl::StatusOr<int> exit = ferry->Wait(absl::Seconds(30));
  EXPECT_TRUE(exit.ok()) << "the drain waits only for what the worker has (<= 1s of work), "
                            "not for the queue nor the 60s grace\n"
                         << LogTail(*ferry);
  if (!exit.ok()) return processed;
  const absl::Duration took = absl::Now() - signalled;
  EXPECT_EQ(*exit, 0) << LogTail(*ferry);
  EXPECT_LT(took, absl::Seconds(20)) << "exit well before the 60s grace";
  EXPECT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);

  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  EXPECT_TRUE(handled.ok()) << handled.status();
  if (!handled.ok()) return processed;
  // Before the signal the worker's credit bounds what it holds to 4. A
  // result ferry had by then came from a handler that started at least
  // kWork before it. So with no dispatch after the signal, everything the
  // worker ever handled is at most those plus the 4 it held.
  int64_t finished_before_signal = 0;
  int64_t started_after_signal = 0;
  for (const HandledEvent& event : *handled) {
    if (event.monotonic_ns <= signalled_ns - absl::ToInt64Nanoseconds(kWork)) {
      ++finished_before_signal;
    }
    if (event.monotonic_ns > signalled_ns) ++started_after_signal;
    EXPECT_EQ(event.answer, "OK");
    processed[event.partition].insert(event.offset);
  }
  EXPECT_LE(static_cast<int64_t>(handled->size()), finished_before_signal + 4)
      << started_after_signal << " handler runs started after the signal\n"
      << LogTail(*ferry);
  EXPECT_LT(static_cast<int64_t>(handled->size()), kEvents) << "the test must stop mid-run";

  // Committed == processed: with partition ordering each partition's
  // processed offsets are a prefix, and the drain finished all of it.
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(cluster.bootstrap, topic, topic + "-group");
  EXPECT_TRUE(committed.ok()) << committed.status();
  if (!committed.ok()) return processed;
  for (int32_t partition = 0; partition < kPartitions; ++partition) {
    const std::set<int64_t>& offsets = processed[partition];
    const int64_t expected =
        offsets.empty() ? test_tools::kNoCommittedOffset : static_cast<int64_t>(offsets.size());
    if (!offsets.empty()) {
      EXPECT_EQ(*offsets.rbegin() + 1, static_cast<int64_t>(offsets.size()))
          << "partition " << partition << ": processed offsets are not a prefix";
    }
    EXPECT_EQ(committed->at(partition), expected) << "partition " << partition;
  }
  EXPECT_THAT(ferry->Log(), HasSubstr("draining: waiting for"));
  return processed;
}

TEST(ShutdownTest, SigtermDispatchesNothingNewAndCommitsExactlyWhatWasProcessed) {
  constexpr char kTopic[] = "drain-term";
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, kPartitions, kPartitions).ok());
  std::map<int32_t, std::set<int64_t>> first_run =
      SignalMidRunAndCheckTheDrain(SIGTERM, kTopic, *cluster);
  if (HasFailure()) return;

  // The next start delivers exactly the rest: from each committed offset on.
  absl::StatusOr<Worker> fast = StartWorker("drain-term-fast", 64);
  ASSERT_TRUE(fast.ok()) << fast.status();
  std::string config = SlowConfig(cluster->bootstrap, kTopic, fast->port);
  absl::StatusOr<Subprocess> again = StartFerry(config, "ferry-drain-term-again");
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, kTopic, std::string(kTopic) + "-group", kEvents, *again,
      absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*again);
  ASSERT_EQ(Terminate(*again, absl::Seconds(30)).value_or(-1), 0) << LogTail(*again);
  ASSERT_EQ(Terminate(fast->process, absl::Seconds(30)).value_or(-1), 0);
  absl::StatusOr<std::vector<HandledEvent>> second_run = ReadHandledEvents(fast->record_path);
  ASSERT_TRUE(second_run.ok()) << second_run.status();
  std::map<int32_t, std::set<int64_t>> all = first_run;
  for (const HandledEvent& event : *second_run) {
    EXPECT_EQ(first_run[event.partition].count(event.offset), 0u)
        << "partition " << event.partition << " offset " << event.offset
        << " was committed by the first run and delivered again";
    all[event.partition].insert(event.offset);
  }
  int64_t total = 0;
  for (const auto& [partition, offsets] : all) total += static_cast<int64_t>(offsets.size());
  EXPECT_EQ(total, kEvents) << "every event processed by one run or the other";
}

TEST(ShutdownTest, SighupDrainsCommitsAndExitsZero) {
  constexpr char kTopic[] = "drain-hup";
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, kPartitions, kPartitions).ok());
  SignalMidRunAndCheckTheDrain(SIGHUP, kTopic, *cluster);
}

// librdkafka's own log lines are "%<level>|<time>|<FACILITY>|..."; level 3
// and below are errors. ferry's are "<time> ERROR <component>: ...".
std::vector<std::string> ErrorLines(const std::string& log) {
  std::vector<std::string> errors;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    const bool rdkafka_error = line.size() > 2 && line[0] == '%' && line[1] >= '0' &&
                               line[1] <= '3' && line[2] == '|';
    if (rdkafka_error || absl::StrContains(line, " ERROR ")) errors.emplace_back(line);
  }
  return errors;
}

// With both consumer group protocols: for `consumer` (KIP-848) the embedded
// cluster must not add the classic-only session settings librdkafka refuses.
class EmbeddedShutdownTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbeddedShutdownTest, TheEmbeddedClusterStopsWithoutErrorLines) {
  // No kafka.bootstrap.servers: ferry runs its embedded mock cluster. A
  // dead-letter topic is configured so its producer exists too.
  absl::StatusOr<Worker> worker = StartWorker(absl::StrCat("embedded-", GetParam()), 64);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string bootstrap_file = TempPath(absl::StrCat("embedded-bootstrap-", GetParam()));
  absl::StatusOr<Subprocess> ferry = StartFerry(
      absl::StrCat("kafka:\n"
                   "  group.protocol: ", GetParam(), "\n"
                   "topics:\n"
                   "  - name: events\n"
                   "processors:\n"
                   "  - name: default\n"
                   "    target: ipv4:127.0.0.1:", worker->port, "\n",
                   "failures:\n"
                   "  dead_letter_topic: events-dlq\n"
                   "server:\n"
                   "  listen: 127.0.0.1:0\n"
                   "  metrics_listen: 127.0.0.1:0\n"
                   "embedded:\n"
                   "  partitions: 2\n"
                   "  bootstrap_file: ", bootstrap_file, "\n"),
      absl::StrCat("ferry-embedded-", GetParam()));
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<std::string> bootstrap = WaitForFile(bootstrap_file, absl::Seconds(30));
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status() << LogTail(*ferry);
  const std::string servers(absl::StripAsciiWhitespace(*bootstrap));
  ASSERT_TRUE(Produce(servers, "events", 100, 10, 2).ok());
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(servers, "events", "ferry", 100, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);

  ASSERT_EQ(Terminate(*ferry, absl::Seconds(60)).value_or(-1), 0) << LogTail(*ferry);
  EXPECT_THAT(ferry->Log(), HasSubstr("stopped"));
  EXPECT_THAT(ErrorLines(ferry->Log()), IsEmpty()) << LogTail(*ferry);
  EXPECT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);
}

INSTANTIATE_TEST_SUITE_P(GroupProtocols, EmbeddedShutdownTest,
                         ::testing::Values("classic", "consumer"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ferry::testing
