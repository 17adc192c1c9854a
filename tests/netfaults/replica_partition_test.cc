// A ferry replica partitioned from the broker (but not from its workers) for
// longer than the session timeout, then healed, on a real Kafka broker.
//
// Two replicas, A and B, in one group; each dials its own example worker
// (WA, WB), so a worker's record file says which replica dispatched what. The
// broker has a listener per replica (REPLICA_A, REPLICA_B, each advertising
// itself), and the test runs in its own network namespace, so cutting A from
// the broker is an nftables rule dropping every packet of A's listener port:
// silent (no RST, no FIN; TCP retransmits into the void), as across a real
// partition. A's links to WA stay up.
//
// A backlog keeps both replicas' budgets full and a producer adds a steady
// stream. Then:
//   cut:  A's partitions move to B once the broker's session timeout expires;
//         A, which cannot heartbeat, declares its assignment lost (librdkafka
//         enforces session.timeout.ms locally too) and stops dispatching:
//         WA starts no event later than cut + session timeout + grace while
//         the cut lasts, although A's buffer held far more work than WA does
//         in that time; A commits nothing for partitions it lost (committed
//         offsets, sampled every 100 ms through the broker's own listener,
//         never go backwards).
//   heal: A rejoins, gets partitions again and acks more events.
// At the end the group's committed offsets equal the end offsets; nothing
// lost; per-key order holds outside redelivery; duplicates (A's in-flight
// work redone by B, and the heal's rebalance) are bounded by the two
// replicas' budgets (see the check). Prints lost / duplicated /
// dead-lettered counts.
//
// FERRY_NETFAULTS_LARGE=1: a bigger backlog and a longer cut.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"
#include "tests/kafka/commit_sampler.h"
#include "tests/netfaults/delivery_audit.h"
#include "tests/netfaults/netns.h"
#include "tests/netfaults/steady_producer.h"

namespace ferry::testing {
namespace {

// The test has the namespace to itself: fixed ports cannot collide.
constexpr int kPortA = 19092;
constexpr int kPortB = 19093;

KafkaBroker::Options BrokerOptions() {
  KafkaBroker::Options options;
  options.extra_listeners = {{"REPLICA_A", kPortA, kPortA}, {"REPLICA_B", kPortB, kPortB}};
  return options;
}

const ::testing::Environment* const kBroker = ::testing::AddGlobalTestEnvironment(
    new BrokerEnvironment("replica_partition_test", BrokerOptions()));

constexpr int kPartitions = 8;
constexpr int kSessionTimeoutMs = 6000;  // FerryConfig's
constexpr int kBudget = 3000;            // max_buffered_events per replica

bool Large() { return std::getenv("FERRY_NETFAULTS_LARGE") != nullptr; }

int64_t NowMonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

std::string ReplicaConfig(int port, const std::string& topic, const Worker& worker) {
  return FerryConfig(absl::StrCat("127.0.0.1:", port), "ferry-partition", topic,
                     absl::StrCat("127.0.0.1:", worker.port), /*streams=*/1,
                     absl::StrCat("budgets:\n  max_buffered_events: ", kBudget,
                                  "\n  resume_fraction: 0.9\n"
                                  "failures:\n  dead_letter_topic: partition-dlq\n"),
                     /*progress_interval=*/"200ms");
}

int64_t CountOf(const std::string& log, const std::string& text) {
  int64_t count = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++count;
  return count;
}

using ReplicaPartitionTest = RealKafkaTest;

TEST_F(ReplicaPartitionTest, PartitionedReplicaStopsAndRejoinsNothingLost) {
  const std::string topic = "partition";
  ASSERT_TRUE(broker().CreateTopic(topic, kPartitions).ok());
  ASSERT_TRUE(broker().CreateTopic("partition-dlq", 1).ok());
  absl::StatusOr<PacketFilter> filter = PacketFilter::Create();
  ASSERT_TRUE(filter.ok()) << filter.status();
  const int backlog = Large() ? 40000 : 8000;
  ASSERT_TRUE(Produce(bootstrap(), topic, backlog, 400, kPartitions).ok());

  // 2 handler threads x 10 ms: 200 events/s per worker, so A's full budget
  // is ~15 s of WA's work, far more than the session timeout.
  std::vector<Worker> workers;
  for (const char* name : {"wa", "wb"}) {
    absl::StatusOr<Worker> worker =
        StartWorker(name, 16, 0, {"--work_us=10000", "--handler_threads=2"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers.push_back(*std::move(worker));
  }
  CommitSampler sampler(bootstrap(), topic, "ferry-partition");
  SteadyProducer producer(bootstrap(), topic, kPartitions, 25);
  absl::StatusOr<Subprocess> a = StartFerry(ReplicaConfig(kPortA, topic, workers[0]), "ferry-a");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<Subprocess> b = StartFerry(ReplicaConfig(kPortB, topic, workers[1]), "ferry-b");
  ASSERT_TRUE(b.ok()) << b.status();
  auto progress = [](const Subprocess& ferry, const char* name) {
    return LastProgressValue(ferry.Log(), name);
  };
  auto tails = [&] { return LogTail(*a, 4000) + LogTail(*b, 4000); };

  ASSERT_TRUE(PollUntil(
      [&] {
        return progress(*a, "partitions") > 0 && progress(*b, "partitions") > 0 &&
               progress(*a, "acked") >= 300;
      },
      absl::Seconds(60)))
      << "A and B never both worked\n" << tails();

  // Cut A from the broker.
  const int64_t cut_ns = NowMonotonicNs();
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(filter->Drop(kPortA).ok());
  ASSERT_TRUE(PollUntil([&] { return progress(*b, "partitions") == kPartitions; },
                        absl::Seconds(60)))
      << "B never took A's partitions\n" << tails();
  const absl::Duration takeover = absl::Now() - cut;
  ASSERT_TRUE(PollUntil([&] { return progress(*a, "partitions") == 0; }, absl::Seconds(60)))
      << "A never gave up its partitions\n" << tails();
  const absl::Duration gave_up = absl::Now() - cut;
  // Stay cut well past the session timeout (A keeps failing to rejoin).
  const absl::Duration cut_for = Large() ? absl::Seconds(60) : absl::Seconds(15);
  PollUntil([&] { return a->TryWait().has_value(); }, cut_for - (absl::Now() - cut));
  ASSERT_FALSE(a->TryWait().has_value()) << "A exited during the cut\n" << LogTail(*a);
  const int64_t heal_ns = NowMonotonicNs();
  ASSERT_TRUE(filter->Heal(kPortA).ok());
  const absl::Time healed = absl::Now();
  const int64_t acked_at_heal = progress(*a, "acked");

  ASSERT_TRUE(PollUntil(
      [&] { return progress(*a, "partitions") > 0 && progress(*a, "acked") > acked_at_heal; },
      absl::Seconds(90)))
      << "A never rejoined and worked again\n" << tails();
  const absl::Duration rejoined = absl::Now() - healed;
  const int64_t produced = backlog + producer.Stop();
  ASSERT_TRUE(producer.error().empty()) << producer.error();
  absl::StatusOr<test_tools::GroupProgress> done =
      WaitAllCommitted(bootstrap(), topic, "ferry-partition", produced, *b, absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << tails();
  sampler.Stop();
  for (Subprocess* ferry : {&*a, &*b}) {
    absl::StatusOr<int> exit = Terminate(*ferry, absl::Seconds(60));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0) << LogTail(*ferry);
  }
  std::vector<std::vector<HandledEvent>> records;
  std::vector<HandledEvent> all;
  for (Worker& worker : workers) {
    EXPECT_EQ(StopWorker(worker), 0);
    absl::StatusOr<std::vector<HandledEvent>> events = ReadHandledEvents(worker.record_path);
    ASSERT_TRUE(events.ok()) << events.status();
    records.push_back(*events);
    all.insert(all.end(), events->begin(), events->end());
  }

  // A stopped dispatching once it lost its partitions: WA started nothing
  // between cut + session timeout + grace and the heal.
  const int64_t quiet_from = cut_ns + int64_t{kSessionTimeoutMs + 3000} * 1000000;
  int64_t dispatched_after_cut = 0;
  int64_t dispatched_while_lost = 0;
  int64_t last_after_cut_ns = cut_ns;
  for (const HandledEvent& event : records[0]) {
    if (event.monotonic_ns < cut_ns || event.monotonic_ns > heal_ns) continue;
    ++dispatched_after_cut;
    last_after_cut_ns = std::max(last_after_cut_ns, event.monotonic_ns);
    if (event.monotonic_ns > quiet_from) ++dispatched_while_lost;
  }
  EXPECT_EQ(dispatched_while_lost, 0)
      << "A kept dispatching after its assignment was lost; its last start was "
      << absl::Nanoseconds(last_after_cut_ns - cut_ns) << " after the cut";

  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(bootstrap(), topic);
  ASSERT_TRUE(end.ok()) << end.status();
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(bootstrap(), "partition-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  const DeliveryAudit audit = AuditDeliveries(all, *end, *dead);
  const std::vector<std::string> backwards = BackwardSteps(sampler.samples());
  std::cout << "replica partition result: " << audit.Summary()
            << " committed_backwards=" << backwards.size() << " takeover_after="
            << takeover << " a_gave_up_after=" << gave_up << " a_rejoined_after_heal="
            << rejoined << " a_dispatched_after_cut=" << dispatched_after_cut
            << " a_last_dispatch_after_cut=" << absl::Nanoseconds(last_after_cut_ns - cut_ns)
            << " a_commit_failures="
            << CountOf(a->Log(), "commit failed") + CountOf(a->Log(), "commit on revoke failed")
            << " commit_samples=" << sampler.samples().size() << std::endl;
  EXPECT_EQ(audit.events, produced);
  EXPECT_EQ(audit.lost, 0);
  EXPECT_EQ(audit.dead_lettered, 0);
  EXPECT_EQ(audit.order_violations, 0);
  for (const std::string& problem : audit.problems) ADD_FAILURE() << problem;
  EXPECT_TRUE(backwards.empty());
  for (const std::string& step : backwards) ADD_FAILURE() << step;
  // Two moves (cut: A's partitions to B; heal: some back to A), each redoing
  // what the old owner handled past its last commit: A's work after the cut
  // (at most its buffer) and B's handled-but-uncommitted work at the heal
  // (its buffer, plus work finished above a slower offset of the same
  // partition, which a 15 s queue lets grow to about another buffer).
  EXPECT_LE(audit.duplicated, 3 * kBudget) << "duplicates beyond what two moves can redo";
  EXPECT_GE(sampler.samples().size(), 20u);
}

}  // namespace
}  // namespace ferry::testing
