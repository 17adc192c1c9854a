// Failure semantics end to end (mock cluster, the ferry binary, example
// workers that inject faults): retries keep key order, terminal failures and
// poison records land in the dead-letter topic with their provenance,
// timeouts are cancelled and dead-lettered, `block` holds a partition, and a
// second SIGTERM ends the drain at once. In every case the group's committed
// offsets only cover finished events.
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// One handler run, from an example worker's --record file.
struct Answer {
  std::string key;
  int64_t sequence = 0;
  int64_t monotonic_ns = 0;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string answer;  // OK, RETRY or FAIL
};

std::vector<Answer> ReadAnswers(const std::string& path) {
  std::vector<Answer> answers;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() < 6) continue;
    Answer answer;
    answer.key = fields[0];
    if (!absl::SimpleAtoi(fields[1], &answer.sequence) ||
        !absl::SimpleAtoi(fields[2], &answer.monotonic_ns) ||
        !absl::SimpleAtoi(fields[3], &answer.partition) ||
        !absl::SimpleAtoi(fields[4], &answer.offset)) {
      continue;
    }
    answer.answer = fields[5];
    answers.push_back(answer);
  }
  return answers;
}

// A mock cluster with a source topic and its dead-letter topic.
struct Cluster {
  Subprocess process;
  std::string bootstrap;
};

Cluster StartCluster(const std::string& topic, int partitions) {
  const std::string bootstrap_file = TempPath("bootstrap-" + topic);
  Cluster cluster;
  cluster.process =
      Subprocess::Start({"tests/tools/kafka_tool", "mock", absl::StrCat("--partitions=", partitions),
                         absl::StrCat("--topics=", topic, ",", topic, "-dlq"),
                         absl::StrCat("--bootstrap_file=", bootstrap_file)},
                        TempPath("mock-" + topic + ".log"))
          .value();
  cluster.bootstrap = std::string(
      absl::StripAsciiWhitespace(WaitForFile(bootstrap_file, absl::Seconds(30)).value()));
  return cluster;
}

TEST(FailureTest, RetriesKeepKeyOrderAndFailuresAreDeadLettered) {
  constexpr int kEvents = 2000;
  constexpr int kKeys = 100;
  Cluster cluster = StartCluster("orders", 4);
  ASSERT_TRUE(Produce(cluster.bootstrap, "orders", kEvents, kKeys, 4).ok());
  // Every event: RETRY on attempt 1; on attempt 2, FAIL for 1 in 10, else OK.
  absl::StatusOr<Worker> worker =
      StartWorker("faulty", 16, 0, {"--retry_attempts=2", "--fail_every=10"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string config = FerryConfig(cluster.bootstrap, "orders-group", "orders",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), 2,
                                   "failures:\n  dead_letter_topic: orders-dlq\n");
  config.replace(config.find("    timeout: 60s\n"), 16,
                 "    timeout: 60s\n    retry_backoff: 10ms\n    max_attempts: 3\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-orders");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster.bootstrap, "orders", "orders-group", kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  ASSERT_EQ(StopWorker(*worker), 0);

  // The dead-letter topic holds exactly the failed events, with provenance.
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster.bootstrap, "orders-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  EXPECT_EQ(dead->size(), static_cast<size_t>(kEvents / 10));
  std::set<std::pair<std::string, int64_t>> dead_letters;
  for (const test_tools::ConsumedRecord& record : *dead) {
    int64_t sequence = -1;
    ASSERT_TRUE(absl::SimpleAtoi(record.value, &sequence)) << record.value;
    EXPECT_EQ((sequence + 1) % 10, 0) << "only failed events are dead-lettered";
    ASSERT_TRUE(record.key.has_value());
    EXPECT_EQ(record.Header("ferry.source.topic"), "orders");
    EXPECT_FALSE(record.Header("ferry.source.offset").empty());
    EXPECT_EQ(record.Header("ferry.attempts"), "2");
    EXPECT_EQ(record.Header("ferry.processor"), "default");
    EXPECT_THAT(record.Header("ferry.error"), HasSubstr("injected: every 10"));
    EXPECT_FALSE(record.Header("ferry.instance").empty());
    dead_letters.insert({*record.key, sequence});
  }
  EXPECT_EQ(dead_letters.size(), static_cast<size_t>(kEvents / 10)) << "no duplicates";

  // Each key's answers, in handler order, follow produce order: RETRY then the
  // final answer for sequence 0, then for 1, ... A retry never let a later
  // event of its key overtake it.
  std::map<std::string, std::vector<Answer>> by_key;
  for (const Answer& answer : ReadAnswers(worker->record_path)) {
    by_key[answer.key].push_back(answer);
  }
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  for (auto& [key, answers] : by_key) {
    std::sort(answers.begin(), answers.end(),
              [](const Answer& a, const Answer& b) { return a.monotonic_ns < b.monotonic_ns; });
    ASSERT_EQ(answers.size(), static_cast<size_t>(2 * kEvents / kKeys)) << key;
    for (size_t i = 0; i < answers.size(); ++i) {
      EXPECT_EQ(answers[i].sequence, static_cast<int64_t>(i / 2)) << key << " #" << i;
      if (i % 2 == 0) {
        EXPECT_EQ(answers[i].answer, "RETRY");
      } else {
        const bool fails = (answers[i].sequence + 1) % 10 == 0;
        EXPECT_EQ(answers[i].answer, fails ? "FAIL" : "OK");
        if (fails) {
          EXPECT_EQ(dead_letters.count({key, answers[i].sequence}), 1u);
        }
      }
    }
  }
  EXPECT_EQ(LastProgressValue(ferry->Log(), "retried"), kEvents);
  EXPECT_EQ(LastProgressValue(ferry->Log(), "failed"), kEvents / 10);
}

TEST(FailureTest, TimeoutsAreCancelledAndDeadLetteredWithoutStalling) {
  Cluster cluster = StartCluster("slow", 2);
  ASSERT_TRUE(Produce(cluster.bootstrap, "slow", 6, 6, 2).ok());
  // Every event stalls 5 s; the processor gives up after 300ms.
  absl::StatusOr<Worker> worker =
      StartWorker("stalling", 16, 0, {"--stall_rate=1", "--stall_ms=5000", "--handler_threads=8"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string config = FerryConfig(cluster.bootstrap, "slow-group", "slow",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                                   "failures:\n  dead_letter_topic: slow-dlq\n");
  config.replace(config.find("timeout: 60s"), 12, "timeout: 300ms");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-slow");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const absl::Time started = absl::Now();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster.bootstrap, "slow", "slow-group", 6, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  // Committed well before the stalls would have ended on their own: the
  // partition did not wait for the slow worker.
  EXPECT_LT(absl::Now() - started, absl::Seconds(5) + absl::Seconds(8));
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster.bootstrap, "slow-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 6u);
  for (const test_tools::ConsumedRecord& record : *dead) {
    EXPECT_THAT(record.Header("ferry.error"), HasSubstr("timed out after 300ms"));
  }
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  EXPECT_EQ(LastProgressValue(ferry->Log(), "failed"), 6);
  StopWorker(*worker);
}

TEST(FailureTest, PoisonAndOversizeRecordsAreDeadLetteredAndNeverStall) {
  Cluster cluster = StartCluster("poison", 1);
  // kafka_tool's payloads are plain numbers: `type: json:/type` cannot find a
  // type in them, so every record is poison.
  ASSERT_TRUE(Produce(cluster.bootstrap, "poison", 20, 4, 1).ok());
  absl::StatusOr<Worker> worker = StartWorker("unused", 16);
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string config = FerryConfig(cluster.bootstrap, "poison-group", "poison",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                                   "failures:\n  dead_letter_topic: poison-dlq\n");
  config.replace(config.find("    ordering: key\n"), 17, "    ordering: key\n    type: json:/type\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-poison");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster.bootstrap, "poison", "poison-group", 20, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster.bootstrap, "poison-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 20u);
  for (const test_tools::ConsumedRecord& record : *dead) {
    EXPECT_EQ(record.Header("ferry.attempts"), "0");
    EXPECT_THAT(record.Header("ferry.error"), HasSubstr("poison record"));
  }
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  ASSERT_EQ(StopWorker(*worker), 0);
  EXPECT_EQ(ReadStats(worker->stats_path).at("events_received"), 0);
}

TEST(FailureTest, OversizeRecordsArePoison) {
  Cluster cluster = StartCluster("big", 1);
  // 2 KiB of headers per record, over a 1 KiB max_event_bytes.
  Subprocess producer =
      Subprocess::Start({"tests/tools/kafka_tool", "produce",
                         absl::StrCat("--bootstrap=", cluster.bootstrap), "--topic=big",
                         "--count=5", "--keys=1", absl::StrCat("--headers=big=", std::string(2048, 'x'))},
                        TempPath("produce-big.log"))
          .value();
  ASSERT_EQ(producer.Wait(absl::Seconds(60)).value_or(-1), 0) << producer.Log();
  absl::StatusOr<Worker> worker = StartWorker("unused-big", 16);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster.bootstrap, "big-group", "big",
                  absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                  "failures:\n  dead_letter_topic: big-dlq\n  max_event_bytes: 1KiB\n"),
      "ferry-big");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster.bootstrap, "big", "big-group", 5, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster.bootstrap, "big-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 5u);
  EXPECT_THAT((*dead)[0].Header("ferry.error"), HasSubstr("over failures.max_event_bytes"));
  EXPECT_EQ((*dead)[0].Header("big").size(), 2048u);  // the original headers are kept
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  StopWorker(*worker);
}

TEST(FailureTest, BlockHoldsEachPartitionAtItsFirstFailure) {
  constexpr int kEvents = 200;
  Cluster cluster = StartCluster("held", 4);
  ASSERT_TRUE(Produce(cluster.bootstrap, "held", kEvents, 20, 4).ok());
  // Sequence 4 of every key fails (each key has sequences 0..9).
  absl::StatusOr<Worker> worker = StartWorker("blocker", 16, 0, {"--fail_every=5"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster.bootstrap, "held-group", "held",
                  absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                  "failures:\n  on_failure: block\n"),
      "ferry-held");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  // Wait until every partition reports blocked in the log.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    const std::string log = ferry->Log();
    int blocked = 0;
    for (int p = 0; p < 4; ++p) {
      if (log.find(absl::StrCat("paused blocked partitions: held/", p)) != std::string::npos ||
          log.find(absl::StrCat(",held/", p)) != std::string::npos) {
        ++blocked;
      }
    }
    if (blocked == 4) break;
    ASSERT_LT(absl::Now(), deadline) << LogTail(*ferry);
    absl::SleepFor(absl::Milliseconds(100));  // polling ferry's log
  }
  // SIGTERM: the drain does not wait for blocked events (they cannot finish
  // without an operator), and shutdown commits what is finished.
  const absl::Time stopping = absl::Now();
  ferry->Signal(SIGTERM);
  EXPECT_EQ(ferry->Wait(absl::Seconds(30)).value_or(-1), 0);
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(10)) << "the default grace is 20s";
  ASSERT_EQ(StopWorker(*worker), 0);

  // Per partition, the commit stops exactly at the first failed offset.
  std::map<int32_t, int64_t> first_failure;
  for (const Answer& answer : ReadAnswers(worker->record_path)) {
    if (answer.answer != "FAIL") continue;
    auto [it, inserted] = first_failure.emplace(answer.partition, answer.offset);
    if (!inserted) it->second = std::min(it->second, answer.offset);
  }
  ASSERT_EQ(first_failure.size(), 4u);
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(cluster.bootstrap, "held", "held-group");
  ASSERT_TRUE(committed.ok()) << committed.status();
  for (const auto& [partition, offset] : first_failure) {
    EXPECT_EQ(committed->at(partition), offset) << "partition " << partition;
  }
  // And nothing after a failed event of its key was processed.
  std::map<std::string, int64_t> failed_sequence;
  std::vector<Answer> answers = ReadAnswers(worker->record_path);
  for (const Answer& answer : answers) {
    if (answer.answer == "FAIL") failed_sequence[answer.key] = answer.sequence;
  }
  for (const Answer& answer : answers) {
    auto it = failed_sequence.find(answer.key);
    if (it != failed_sequence.end()) {
      EXPECT_LE(answer.sequence, it->second) << answer.key;
    }
  }
}

TEST(FailureTest, SecondSigtermEndsTheDrainAtOnce) {
  Cluster cluster = StartCluster("drain", 1);
  ASSERT_TRUE(Produce(cluster.bootstrap, "drain", 4, 4, 1).ok());
  absl::StatusOr<Worker> worker =
      StartWorker("sleepy", 16, 0, {"--stall_rate=1", "--stall_ms=60000", "--handler_threads=4"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string config = FerryConfig(cluster.bootstrap, "drain-group", "drain",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                                   "shutdown:\n  grace: 120s\n");
  config.replace(config.find("timeout: 60s"), 12, "timeout: 600s");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-drain");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (LastProgressValue(ferry->Log(), "in_flight") < 4) {
    ASSERT_LT(absl::Now(), deadline) << LogTail(*ferry);
    absl::SleepFor(absl::Milliseconds(100));  // polling ferry's progress
  }
  ferry->Signal(SIGTERM);
  EXPECT_FALSE(ferry->Wait(absl::Seconds(2)).ok()) << "the first SIGTERM waits for in-flight events";
  ferry->Signal(SIGTERM);
  absl::StatusOr<int> exit = ferry->Wait(absl::Seconds(15));
  ASSERT_TRUE(exit.ok()) << "a second SIGTERM must end the drain\n" << LogTail(*ferry);
  EXPECT_EQ(*exit, 0);
  EXPECT_THAT(ferry->Log(), HasSubstr("second signal"));
  // Nothing unfinished was committed.
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(cluster.bootstrap, "drain", "drain-group");
  ASSERT_TRUE(committed.ok());
  EXPECT_EQ(committed->at(0), test_tools::kNoCommittedOffset);
  worker->process.Signal(SIGKILL);
}

}  // namespace
}  // namespace ferry::testing
