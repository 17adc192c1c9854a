// Priority classes end to end (the ferry binary, a capacity-limited example
// worker, librdkafka's mock cluster): topics hi, med and lo in classes of
// weight 6, 3 and 1, every one with a backlog, one worker that handles about
// 2,000 events/s.
//
// Checks, from the worker's own record of when each handler started:
//   * over a window where all three are backlogged, the shares of handled
//     events are within ±10% of 6:3:1;
//   * once hi and med are done, lo alone gets the whole capacity (an idle
//     class lends its share);
//   * everything is handled once and committed.
#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

// `count` records of `topic` keyed `<topic>-<i % keys>`.
absl::Status ProduceWithPrefix(const std::string& bootstrap, const std::string& topic, int count,
                               int keys, int partitions) {
  absl::StatusOr<Subprocess> producer = Subprocess::Start(
      {"tests/tools/kafka_tool", "produce", absl::StrCat("--bootstrap=", bootstrap),
       absl::StrCat("--topic=", topic), absl::StrCat("--count=", count),
       absl::StrCat("--keys=", keys), absl::StrCat("--partitions=", partitions),
       absl::StrCat("--key_prefix=", topic, "-")},
      TempPath(absl::StrCat("produce-", topic, ".log")));
  if (!producer.ok()) return producer.status();
  absl::StatusOr<int> exit = producer->Wait(absl::Seconds(120));
  if (!exit.ok()) return exit.status();
  if (*exit != 0) return absl::InternalError("produce failed:\n" + producer->Log());
  return absl::OkStatus();
}

std::string TopicOf(const HandledEvent& event) {
  return event.key.substr(0, event.key.find('-'));
}

TEST(PriorityTest, SharesFollowTheWeightsAndAnIdleClassLendsItsShare) {
  constexpr int kPerTopic = 4000;
  constexpr int kPartitions = 4;
  const std::vector<std::string> topics = {"hi", "med", "lo"};
  absl::StatusOr<MockCluster> cluster = StartMockCluster("hi,med,lo", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (const std::string& topic : topics) {
    ASSERT_TRUE(ProduceWithPrefix(cluster->bootstrap, topic, kPerTopic, 200, kPartitions).ok());
  }
  // 4 handler threads x 2 ms: about 2,000 events/s, far below what ferry
  // could send; 2 streams x credit 4.
  absl::StatusOr<Worker> worker =
      StartWorker("prio", 4, 0, {"--work_us=2000", "--handler_threads=4"});
  ASSERT_TRUE(worker.ok()) << worker.status();

  const std::string config = absl::StrCat(
      "kafka:\n"
      "  bootstrap.servers: ", cluster->bootstrap, "\n",
      "  group.id: prio-group\n"
      "  session.timeout.ms: 6000\n"
      "  heartbeat.interval.ms: 500\n"
      "topics:\n"
      "  - name: hi\n"
      "    priority: high\n"
      "  - name: med\n"
      "    priority: medium\n"
      "  - name: lo\n"
      "priorities:\n"
      "  classes: {high: 6, medium: 3, low: 1}\n"
      "  default: low\n"
      "processors:\n"
      "  - name: default\n"
      "    target: ipv4:127.0.0.1:", worker->port, "\n",
      "    streams: 2\n"
      "    timeout: 60s\n"
      "server:\n"
      "  listen: 127.0.0.1:0\n"
      "commit:\n"
      "  interval: 200ms\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-prio");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  for (const std::string& topic : topics) {
    absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
        cluster->bootstrap, topic, "prio-group", kPerTopic, *ferry, absl::Seconds(50));
    ASSERT_TRUE(progress.ok()) << topic << ": " << progress.status() << LogTail(*ferry);
  }
  ASSERT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);

  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  ASSERT_EQ(handled->size(), static_cast<size_t>(3 * kPerTopic));
  std::stable_sort(handled->begin(), handled->end(),
                   [](const HandledEvent& a, const HandledEvent& b) {
                     return a.monotonic_ns < b.monotonic_ns;
                   });

  // A window where every class still has a backlog: after ferry has read
  // everything (the first 1,500) and before hi can have run out (hi gets
  // 60%: 3,500 * 0.6 < 4,000).
  constexpr size_t kFrom = 1500;
  constexpr size_t kTo = 3500;
  std::map<std::string, int> count;
  for (size_t i = kFrom; i < kTo; ++i) ++count[TopicOf((*handled)[i])];
  const double window = kTo - kFrom;
  EXPECT_NEAR(count["hi"] / window, 0.6, 0.06) << count["hi"];
  EXPECT_NEAR(count["med"] / window, 0.3, 0.03) << count["med"];
  EXPECT_NEAR(count["lo"] / window, 0.1, 0.01) << count["lo"];
  const double window_seconds =
      ((*handled)[kTo - 1].monotonic_ns - (*handled)[kFrom].monotonic_ns) / 1e9;

  // The tail: hi and med are done (hi after ~6,700 handled, med after
  // ~9,300), lo alone runs at the full capacity, not at its 10% share.
  constexpr size_t kTail = 1500;
  const size_t tail_from = handled->size() - kTail;
  for (size_t i = tail_from; i < handled->size(); ++i) {
    ASSERT_EQ(TopicOf((*handled)[i]), "lo") << "event " << i << " of the tail";
  }
  const double tail_seconds =
      (handled->back().monotonic_ns - (*handled)[tail_from].monotonic_ns) / 1e9;
  const double window_rate = (window - 1) / window_seconds;
  const double tail_rate = (kTail - 1) / tail_seconds;
  EXPECT_GT(tail_rate, 0.7 * window_rate)
      << "lo alone ran at " << tail_rate << "/s, all classes together at " << window_rate << "/s";
  std::cout << "priority_test: window of " << kTo - kFrom << " handled: hi=" << count["hi"]
            << " med=" << count["med"] << " lo=" << count["lo"] << " at " << window_rate
            << "/s; lo alone at the end: " << tail_rate << "/s" << std::endl;
}

}  // namespace
}  // namespace ferry::testing
