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
// up all partitions at each rebalance), for cooperative-sticky (incremental:
// only moved partitions are revoked) and for KIP-848's consumer protocol
// (group.protocol: consumer; the broker assigns, incrementally). With the
// consumer protocol, F1 and F2 must revoke nothing but what moves to F3.
//
// Measured and printed (not asserted: timing on a shared machine): while F3
// joins, the longest time in which no first delivery of the partitions that
// do not move to F3 started (their "pause" as a whole: re-runs of offsets
// after a rebalance are not progress), the same for the moved ones, and for
// all partitions in the equal window before F3 started ("baseline"); and,
// from ferry's logs, the longest an unmoved / a moved partition had no owner.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"
#include "tests/kafka/commit_sampler.h"
#include "tests/kafka/key_order.h"

namespace ferry::testing {
namespace {

using ::testing::IsEmpty;

const ::testing::Environment* const kBroker =
    ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("consumer_group_test"));

using test_tools::GroupProgress;
using test_tools::OffsetMap;

constexpr int kPartitions = 12;
constexpr int kKeys = 1200;
constexpr int kEvents = 36000;
constexpr int kPerKey = kEvents / kKeys;

int64_t TotalCommitted(const std::string& bootstrap, const std::string& topic,
                       const std::string& group) {
  absl::StatusOr<GroupProgress> progress = test_tools::ReadGroupProgress(bootstrap, topic, group);
  return progress.ok() ? progress->TotalCommitted() : -1;
}

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // the clock of the workers' records
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// The partitions of `topic` a ferry log's "assigned: t/0,t/3" or
// "revoked: ..." lines name.
std::set<int32_t> LoggedPartitions(const std::string& log, const std::string& what,
                                   const std::string& topic) {
  std::set<int32_t> partitions;
  const std::string marker = what + ": ";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t end = log.find('\n', at);
    const std::string line = log.substr(at + marker.size(), end - at - marker.size());
    for (size_t p = line.find(topic + "/"); p != std::string::npos;
         p = line.find(topic + "/", p + 1)) {
      partitions.insert(std::atoi(line.c_str() + p + topic.size() + 1));
    }
  }
  return partitions;
}

// The longest stretch of [from_ns, to_ns) in which no event of any of
// `partitions` started (handler start times): how long that set of
// partitions stopped being processed as a whole.
int64_t LongestIdleNs(const std::vector<HandledEvent>& handled, const std::set<int32_t>& partitions,
                      int64_t from_ns, int64_t to_ns) {
  std::vector<int64_t> starts;
  for (const HandledEvent& event : handled) {
    if (partitions.count(event.partition) > 0 && event.monotonic_ns > from_ns &&
        event.monotonic_ns < to_ns) {
      starts.push_back(event.monotonic_ns);
    }
  }
  std::sort(starts.begin(), starts.end());
  int64_t previous = from_ns;
  int64_t longest = 0;
  for (int64_t time : starts) {
    longest = std::max(longest, time - previous);
    previous = time;
  }
  return std::max(longest, to_ns - previous);
}

// Per partition of `topic`: when a ferry log slice says it was revoked
// (false) or assigned (true), from the lines' timestamps ("2026-...Z INFO
// consumer: revoked: t/0,t/3").
using Ownership = std::map<int32_t, std::vector<std::pair<absl::Time, bool>>>;
void CollectOwnership(const std::string& log, const std::string& topic, Ownership* changes) {
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    const bool assigned = line.find("consumer: assigned: ") != std::string::npos;
    if (!assigned && line.find("consumer: revoked: ") == std::string::npos) continue;
    absl::Time time;
    std::string error;
    if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", line.substr(0, line.find(' ')),
                         absl::UTCTimeZone(), &time, &error)) {
      continue;
    }
    for (int32_t partition : LoggedPartitions(line + "\n", assigned ? "assigned" : "revoked",
                                              topic)) {
      (*changes)[partition].push_back({time, assigned});
    }
  }
}

// The longest a partition among `partitions` went unowned (revoked until
// assigned again, or until `end`), in ms.
int64_t LongestUnownedMs(Ownership changes, const std::set<int32_t>& partitions, absl::Time end) {
  absl::Duration longest;
  for (int32_t partition : partitions) {
    std::vector<std::pair<absl::Time, bool>>& list = changes[partition];
    std::sort(list.begin(), list.end());
    absl::Duration unowned;
    std::optional<absl::Time> revoked;
    for (const auto& [time, assigned] : list) {
      if (!assigned && !revoked.has_value()) revoked = time;
      if (assigned && revoked.has_value()) {
        unowned += time - *revoked;
        revoked.reset();
      }
    }
    if (revoked.has_value()) unowned += end - *revoked;
    longest = std::max(longest, unowned);
  }
  return absl::ToInt64Milliseconds(longest);
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
  // While F3 joins: the longest time in which no event of the partitions
  // that stay with F1/F2 (unmoved) started, the same for the partitions
  // moved to F3, and for all partitions in the equal window before F3
  // started (baseline).
  std::set<int32_t> moved;
  int64_t unmoved_pause_ms = -1;
  int64_t moved_pause_ms = -1;
  int64_t baseline_ms = -1;
  // The longest an unmoved / a moved partition had no owner (ferry logs).
  int64_t unmoved_unowned_ms = -1;
  int64_t moved_unowned_ms = -1;
};

int64_t CountLines(const std::string& log, const std::string& text) {
  int64_t count = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++count;
  return count;
}

void MeasurePauses(const std::vector<HandledEvent>& handled, int64_t joined_ns, int64_t owned_ns,
                   GroupRun* run) {
  // From F3's start until 3 s after it owned partitions (the rebalance and
  // the first fetches after it), and the same length just before.
  const int64_t to_ns = owned_ns + 3000000000;
  // Progress is a first delivery: an offset re-run after a rebalance (the
  // eager assignors drop what was buffered and in flight) is work redone.
  std::vector<HandledEvent> firsts(handled);
  std::sort(firsts.begin(), firsts.end(), [](const HandledEvent& a, const HandledEvent& b) {
    return a.monotonic_ns < b.monotonic_ns;
  });
  std::set<std::pair<int32_t, int64_t>> seen;
  firsts.erase(std::remove_if(firsts.begin(), firsts.end(),
                              [&](const HandledEvent& event) {
                                return !seen.insert({event.partition, event.offset}).second;
                              }),
               firsts.end());
  std::set<int32_t> all, unmoved;
  for (int32_t partition = 0; partition < kPartitions; ++partition) {
    all.insert(partition);
    if (run->moved.count(partition) == 0) unmoved.insert(partition);
  }
  run->unmoved_pause_ms = LongestIdleNs(firsts, unmoved, joined_ns, to_ns) / 1000000;
  run->moved_pause_ms = LongestIdleNs(firsts, run->moved, joined_ns, to_ns) / 1000000;
  run->baseline_ms =
      LongestIdleNs(firsts, all, joined_ns - (to_ns - joined_ns), joined_ns) / 1000000;
}

void RunGroupScenario(const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& kafka,
                      GroupRun* run) {
  const bool consumer_protocol =
      std::find(kafka.begin(), kafka.end(), std::make_pair(std::string("group.protocol"),
                                                           std::string("consumer"))) != kafka.end();
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
  const int64_t joined_ns = MonotonicNs();
  // Where F1's and F2's logs stood when F3 started (F1 and F2 may have moved
  // partitions between themselves before).
  const size_t log_at_join[2] = {ferries[0]->Log().size(), ferries[1]->Log().size()};
  ASSERT_TRUE(start_ferry(3).ok());
  ASSERT_TRUE(PollUntil([&] { return owns_partitions(2); }, absl::Seconds(60)))
      << "F3 never got partitions\n" << tails();
  const int64_t owned_ns = MonotonicNs();
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
  // What moved to F3 while it joined, and what F1 and F2 gave up meanwhile.
  run->moved = LoggedPartitions(ferries[2]->Log(), "assigned", topic);
  std::set<int32_t> given_up;
  for (int index : {0, 1}) {
    for (int32_t partition : LoggedPartitions(ferries[index]->Log().substr(log_at_join[index]),
                                              "revoked", topic)) {
      given_up.insert(partition);
    }
  }
  {
    Ownership changes;
    for (int index : {0, 1}) {
      CollectOwnership(ferries[index]->Log().substr(log_at_join[index]), topic, &changes);
    }
    CollectOwnership(ferries[2]->Log(), topic, &changes);
    std::set<int32_t> unmoved;
    for (int32_t partition = 0; partition < kPartitions; ++partition) {
      if (run->moved.count(partition) == 0) unmoved.insert(partition);
    }
    run->unmoved_unowned_ms = LongestUnownedMs(changes, unmoved, absl::Now());
    run->moved_unowned_ms = LongestUnownedMs(changes, run->moved, absl::Now());
  }
  if (consumer_protocol) {
    EXPECT_EQ(run->unmoved_unowned_ms, 0) << "an unmoved partition was revoked\n" << tails();
    for (int32_t partition : given_up) {
      EXPECT_EQ(run->moved.count(partition), 1u)
          << "partition " << partition << " was revoked but did not move to F3\n" << tails();
    }
  }
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
  for (const HandledEvent& event : handled) {
    EXPECT_TRUE(event.answer.empty() || event.answer == "OK") << event.answer;
    offsets[event.partition].insert(event.offset);
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
  const KeyOrder order = CheckKeyOrder(handled);
  ASSERT_THAT(order.violations, IsEmpty());
  ASSERT_EQ(order.first_delivered.size(), static_cast<size_t>(kKeys));
  int64_t distinct = 0;
  for (const auto& [key, sequences] : order.first_delivered) {
    ASSERT_EQ(sequences, kPerKey) << key << ": sequences never handled";
    distinct += sequences;
  }
  EXPECT_EQ(distinct, kEvents);
  run->redelivered = run->handled - distinct;
  MeasurePauses(handled, joined_ns, owned_ns, run);
}

void Report(const std::string& name, const GroupRun& run) {
  std::cout << name << ": handled " << run.handled << " for " << kEvents
            << " events: redelivered (handled more than once) " << run.redelivered << "; "
            << run.samples << " commit samples; ferry logged " << run.failed_commits
            << " failed commits and " << run.lost_assignments << " lost assignments";
  for (const std::string& summary : run.ferry_summaries) std::cout << "; " << summary;
  std::cout << std::endl;
  std::cout << name << ": while F3 joined, no new event of the " << kPartitions - run.moved.size()
            << " unmoved partitions started for " << run.unmoved_pause_ms << " ms, of the "
            << run.moved.size() << " moved to F3 for " << run.moved_pause_ms
            << " ms; baseline (all, before F3) " << run.baseline_ms
            << " ms; longest without an owner: unmoved " << run.unmoved_unowned_ms
            << " ms, moved " << run.moved_unowned_ms << " ms" << std::endl;
  ::testing::Test::RecordProperty("unmoved_unowned_ms", static_cast<int>(run.unmoved_unowned_ms));
  ::testing::Test::RecordProperty("moved_unowned_ms", static_cast<int>(run.moved_unowned_ms));
  ::testing::Test::RecordProperty("unmoved_pause_ms", static_cast<int>(run.unmoved_pause_ms));
  ::testing::Test::RecordProperty("moved_pause_ms", static_cast<int>(run.moved_pause_ms));
  ::testing::Test::RecordProperty("baseline_pause_ms", static_cast<int>(run.baseline_ms));
  ::testing::Test::RecordProperty("redelivered", static_cast<int>(run.redelivered));
  ::testing::Test::RecordProperty("failed_commits", static_cast<int>(run.failed_commits));
  ::testing::Test::RecordProperty("lost_assignments", static_cast<int>(run.lost_assignments));
}

using ConsumerGroupTest = RealKafkaTest;

TEST_F(ConsumerGroupTest, MembersJoinAndLeaveMidStreamRangeAssignor) {
  GroupRun run;
  RunGroupScenario("range", {}, &run);
  if (run.handled > 0) Report("range", run);
}

TEST_F(ConsumerGroupTest, MembersJoinAndLeaveMidStreamCooperativeSticky) {
  GroupRun run;
  RunGroupScenario("cooperative", {{"partition.assignment.strategy", "cooperative-sticky"}}, &run);
  if (run.handled > 0) Report("cooperative", run);
}

// KIP-848 (Kafka 4.1 assigns; librdkafka's callbacks are incremental).
TEST_F(ConsumerGroupTest, MembersJoinAndLeaveMidStreamConsumerProtocol) {
  GroupRun run;
  RunGroupScenario("kip848", {{"group.protocol", "consumer"}}, &run);
  if (run.handled > 0) Report("kip848", run);
}

}  // namespace
}  // namespace ferry::testing
