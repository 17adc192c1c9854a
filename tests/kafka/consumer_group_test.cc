// Several ferry processes in one consumer group on a real Kafka broker,
// with the membership changing while a backlog is being processed:
//
//   F1 and F2 start together and split the 12 partitions; once some events
//   are committed F3 joins (a rebalance moves partitions to it); once about
//   3/8 are committed F1 gets SIGTERM and leaves (its partitions move to
//   F2 and F3), which finish the topic.
//
// All three dial the same two example workers (one round-robin target), so
// every handled event lands in one of two record files. Events are keyed
// (kafka_tool produce: key-i in partition (i % keys) % 12, payload = the
// key's sequence number).
//
// Checks:
//   * no event is lost: every (key, sequence) was handled at least once, and
//     every offset of every partition;
//   * the final committed offsets equal the end offsets (read independently);
//   * no partition's committed offset ever goes backwards: a thread samples
//     the group's committed offsets every 100 ms for the whole test;
//   * per key, first deliveries happen in produce order (by handler start
//     time, CLOCK_MONOTONIC, shared by all processes); redeliveries after a
//     rebalance may repeat earlier sequences, never skip ahead;
//   * every ferry took part, and each exits 0 on SIGTERM.
// Printed (and recorded as test properties): events handled more than once
// (redeliveries caused by the rebalances), per ferry events consumed/acked.
//
// Run for the default assignor (range, eager rebalances: every member gives
// up all partitions at each rebalance) and for cooperative-sticky
// (incremental: only moved partitions are revoked).
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"
#include "tests/kafka/commit_sampler.h"

namespace ferry::testing {
namespace {

const ::testing::Environment* const kBroker =
    ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("consumer_group_test"));

using test_tools::GroupProgress;
using test_tools::OffsetMap;

constexpr int kPartitions = 12;
constexpr int kKeys = 1200;
constexpr int kEvents = 36000;
constexpr int kPerKey = kEvents / kKeys;

// Polls `done` every 100 ms until it holds or `timeout` passes.
template <typename Predicate>
bool PollUntil(Predicate done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(100));  // polling observable state
  }
  return true;
}

int64_t TotalCommitted(const std::string& bootstrap, const std::string& topic,
                       const std::string& group) {
  absl::StatusOr<GroupProgress> progress = test_tools::ReadGroupProgress(bootstrap, topic, group);
  return progress.ok() ? progress->TotalCommitted() : -1;
}

struct GroupRun {
  int64_t handled = 0;      // record lines over both workers
  int64_t redelivered = 0;  // handled - distinct events
  int64_t samples = 0;
  // ferry's warnings, over all three logs: commits the broker refused, and
  // assignments librdkafka declared lost (revoked without a commit).
  int64_t failed_commits = 0;
  int64_t lost_assignments = 0;
  std::vector<std::string> ferry_summaries;
};

int64_t CountLines(const std::string& log, const std::string& text) {
  int64_t count = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++count;
  return count;
}

void RunGroupScenario(const std::string& name, const std::string& assignor, GroupRun* run) {
  const std::string topic = absl::StrCat("group-", name);
  const std::string group = absl::StrCat("ferry-", name);
  const std::string bootstrap = BrokerEnvironment::broker()->bootstrap();
  ASSERT_TRUE(BrokerEnvironment::broker()->CreateTopic(topic, kPartitions).ok());
  ASSERT_TRUE(Produce(bootstrap, topic, kEvents, kKeys, kPartitions).ok());

  // Two shared workers, slow enough that the backlog outlives two rebalances.
  std::vector<Worker> workers;
  for (const char* suffix : {"a", "b"}) {
    absl::StatusOr<Worker> worker = StartWorker(absl::StrCat(name, "-", suffix), 16, 0,
                                                {"--work_us=3000", "--handler_threads=4"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers.push_back(*std::move(worker));
  }
  const std::string target = absl::StrCat("ipv4:127.0.0.1:", workers[0].port, ",127.0.0.1:",
                                          workers[1].port);
  std::vector<std::pair<std::string, std::string>> kafka;
  if (!assignor.empty()) kafka.emplace_back("partition.assignment.strategy", assignor);
  // A small budget keeps what a member holds (and drains on SIGTERM) small;
  // resume early because a real broker's fetch restarts up to ~1 s after a
  // resume.
  const std::string config = FerryConfigWithKafka(
      bootstrap, group, topic, target, /*streams=*/2, kafka,
      "budgets:\n  max_buffered_events: 2000\n  resume_fraction: 0.9\n",
      /*progress_interval=*/"200ms");

  CommitSampler sampler(bootstrap, topic, group);
  std::vector<std::unique_ptr<Subprocess>> ferries;
  auto start_ferry = [&](int index) {
    absl::StatusOr<Subprocess> ferry = StartFerry(config, absl::StrCat("ferry-", name, "-", index));
    if (ferry.ok()) ferries.push_back(std::make_unique<Subprocess>(*std::move(ferry)));
    return ferry.status();
  };
  auto owns_partitions = [&](int index) {
    return LastProgressValue(ferries[index]->Log(), "partitions") > 0;
  };
  auto tails = [&]() {
    std::string text;
    for (const auto& ferry : ferries) text += LogTail(*ferry, 3000);
    return text;
  };

  // F1 and F2 split the partitions.
  ASSERT_TRUE(start_ferry(1).ok());
  ASSERT_TRUE(start_ferry(2).ok());
  ASSERT_TRUE(PollUntil([&] { return owns_partitions(0) && owns_partitions(1); },
                        absl::Seconds(60)))
      << "F1 and F2 never both owned partitions\n" << tails();

  // F3 joins once some events are committed; it must get partitions while
  // the backlog lasts.
  ASSERT_TRUE(PollUntil([&] { return TotalCommitted(bootstrap, topic, group) >= kEvents / 6; },
                        absl::Seconds(60)))
      << tails();
  int64_t committed = TotalCommitted(bootstrap, topic, group);
  ASSERT_LT(committed, kEvents) << "backlog gone before F3 joined";
  ASSERT_TRUE(start_ferry(3).ok());
  ASSERT_TRUE(PollUntil([&] { return owns_partitions(2); }, absl::Seconds(60)))
      << "F3 never got partitions\n" << tails();
  committed = TotalCommitted(bootstrap, topic, group);
  ASSERT_LT(committed, kEvents) << "backlog gone before F3 got partitions";
  std::cout << name << ": F3 owns partitions with " << committed << " of " << kEvents
            << " committed" << std::endl;

  // F1 leaves (SIGTERM) mid-stream, with most of the backlog still ahead
  // (the rest takes the others a few seconds; F1's drain must end first).
  ASSERT_TRUE(PollUntil([&] { return TotalCommitted(bootstrap, topic, group) >= kEvents * 3 / 8; },
                        absl::Seconds(90)))
      << tails();
  committed = TotalCommitted(bootstrap, topic, group);
  ASSERT_LT(committed, kEvents) << "backlog gone before F1 left";
  const absl::Time signalled = absl::Now();
  absl::StatusOr<int> exit1 = Terminate(*ferries[0], absl::Seconds(60));
  ASSERT_TRUE(exit1.ok()) << exit1.status() << "\n" << tails();
  EXPECT_EQ(*exit1, 0) << LogTail(*ferries[0]);
  const int64_t committed_after_leave = TotalCommitted(bootstrap, topic, group);
  std::cout << name << ": F1 left (SIGTERM at " << committed << " committed, exit after "
            << absl::FormatDuration(absl::Now() - signalled) << ", " << committed_after_leave
            << " committed then)" << std::endl;
  EXPECT_LT(committed_after_leave, kEvents) << "F1 left after the backlog was gone";

  // F2 and F3 finish the topic.
  absl::StatusOr<GroupProgress> done =
      WaitAllCommitted(bootstrap, topic, group, kEvents, *ferries[1], absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << tails();
  ASSERT_FALSE(ferries[2]->TryWait().has_value()) << "F3 exited\n" << LogTail(*ferries[2]);
  for (int index : {1, 2}) {
    absl::StatusOr<int> exit = Terminate(*ferries[index], absl::Seconds(60));
    ASSERT_TRUE(exit.ok()) << exit.status() << "\n" << LogTail(*ferries[index]);
    EXPECT_EQ(*exit, 0) << LogTail(*ferries[index]);
  }
  sampler.Stop();
  for (Worker& worker : workers) {
    absl::StatusOr<int> exit = Terminate(worker.process, absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0) << LogTail(worker.process);
  }

  // Every ferry took part.
  for (size_t i = 0; i < ferries.size(); ++i) {
    const std::string log = ferries[i]->Log();
    const int64_t acked = LastProgressValue(log, "acked");
    EXPECT_GT(acked, 0) << "F" << i + 1 << " acked nothing\n" << LogTail(*ferries[i]);
    run->failed_commits +=
        CountLines(log, "commit failed") + CountLines(log, "commit on revoke failed");
    run->lost_assignments += CountLines(log, "assignment lost");
    run->ferry_summaries.push_back(absl::StrCat(
        "F", i + 1, " consumed=", LastProgressValue(log, "consumed"), " acked=", acked,
        " redelivered(stream loss)=", LastProgressValue(log, "redelivered")));
  }

  // Final commit == end, read independently.
  absl::StatusOr<OffsetMap> final_committed =
      test_tools::ReadCommittedOffsets(bootstrap, topic, group);
  absl::StatusOr<OffsetMap> end = test_tools::ReadEndOffsets(bootstrap, topic);
  ASSERT_TRUE(final_committed.ok()) << final_committed.status();
  ASSERT_TRUE(end.ok()) << end.status();
  ASSERT_EQ(end->size(), static_cast<size_t>(kPartitions));
  int64_t total_end = 0;
  for (const auto& [partition, end_offset] : *end) {
    EXPECT_EQ(final_committed->at(partition), end_offset) << "partition " << partition;
    total_end += end_offset;
  }
  EXPECT_EQ(total_end, kEvents);

  // Committed offsets never went backwards, in any sample.
  const std::vector<CommitSampler::Sample> samples = sampler.samples();
  run->samples = static_cast<int64_t>(samples.size());
  EXPECT_GE(samples.size(), 20u) << "too few samples of the committed offsets";
  const std::vector<std::string> backwards = BackwardSteps(samples);
  for (size_t i = 0; i < backwards.size() && i < 10; ++i) ADD_FAILURE() << backwards[i];
  EXPECT_EQ(backwards.size(), 0u);

  // Nothing lost; first deliveries in order per key.
  std::vector<HandledEvent> handled;
  for (const Worker& worker : workers) {
    absl::StatusOr<std::vector<HandledEvent>> events = ReadHandledEvents(worker.record_path);
    ASSERT_TRUE(events.ok()) << events.status();
    handled.insert(handled.end(), events->begin(), events->end());
  }
  run->handled = static_cast<int64_t>(handled.size());
  std::map<int32_t, std::set<int64_t>> offsets;
  std::map<std::string, std::vector<const HandledEvent*>> by_key;
  for (const HandledEvent& event : handled) {
    EXPECT_TRUE(event.answer.empty() || event.answer == "OK") << event.answer;
    offsets[event.partition].insert(event.offset);
    by_key[event.key].push_back(&event);
  }
  for (const auto& [partition, end_offset] : *end) {
    const std::set<int64_t>& seen = offsets[partition];
    EXPECT_EQ(static_cast<int64_t>(seen.size()), end_offset)
        << "partition " << partition << ": offsets never handled";
    if (!seen.empty()) {
      EXPECT_EQ(*seen.begin(), 0) << partition;
      EXPECT_EQ(*seen.rbegin(), end_offset - 1) << partition;
    }
  }
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  int64_t distinct = 0;
  for (auto& [key, events] : by_key) {
    std::stable_sort(events.begin(), events.end(),
                     [](const HandledEvent* a, const HandledEvent* b) {
                       return a->monotonic_ns < b->monotonic_ns;
                     });
    int64_t next_first = 0;
    for (const HandledEvent* event : events) {
      if (event->sequence < next_first) continue;  // a redelivery
      ASSERT_EQ(event->sequence, next_first)
          << key << ": sequence " << event->sequence << " handled before the first delivery of "
          << next_first;
      ++next_first;
    }
    ASSERT_EQ(next_first, kPerKey) << key << ": sequences never handled";
    distinct += next_first;
  }
  EXPECT_EQ(distinct, kEvents);
  run->redelivered = run->handled - distinct;
}

void Report(const std::string& name, const GroupRun& run) {
  std::cout << name << ": handled " << run.handled << " for " << kEvents
            << " events: redelivered (handled more than once) " << run.redelivered << "; "
            << run.samples << " commit samples; ferry logged " << run.failed_commits
            << " failed commits and " << run.lost_assignments << " lost assignments";
  for (const std::string& summary : run.ferry_summaries) std::cout << "; " << summary;
  std::cout << std::endl;
  ::testing::Test::RecordProperty("redelivered", static_cast<int>(run.redelivered));
  ::testing::Test::RecordProperty("failed_commits", static_cast<int>(run.failed_commits));
  ::testing::Test::RecordProperty("lost_assignments", static_cast<int>(run.lost_assignments));
}

using ConsumerGroupTest = RealKafkaTest;

TEST_F(ConsumerGroupTest, MembersJoinAndLeaveMidStreamRangeAssignor) {
  GroupRun run;
  RunGroupScenario("range", "", &run);
  if (run.handled > 0) Report("range", run);
}

TEST_F(ConsumerGroupTest, MembersJoinAndLeaveMidStreamCooperativeSticky) {
  GroupRun run;
  RunGroupScenario("cooperative", "cooperative-sticky", &run);
  if (run.handled > 0) Report("cooperative", run);
}

}  // namespace
}  // namespace ferry::testing
