// The broker is slow: 100-500 ms added to every answer and 1% of the packets
// lost between ferry and the broker, while a stream flows and a small budget
// makes ferry pause and resume fetching again and again.
//
// ferry reaches the real broker through a Toxiproxy proxy (the broker's SLOW
// listener advertises the proxy's port, so every connection ferry opens goes
// through it): a latency toxic of 300 ms +- 200 ms on the answers. Packet
// loss: the test runs in its own network namespace (netns.h) and an nftables
// rule drops 1% of the packets to and from the proxy's port at random; TCP
// retransmits them (on loopback after at least 200 ms), which is what loss
// costs a Kafka client. tc netem, the usual tool, is not in this kernel.
//
// Checks, after the faults end and the stream is drained: ferry went on
// acking while the broker was slow; it paused fetching at its budget and
// resumed every time (debug log lines, paired; nothing stays paused: all is
// committed); its buffered events never went over the budget (progress lines)
// and its peak RSS stayed under 256 MiB; the group's committed offsets equal
// the end offsets; nothing lost, no dead letters, per-key order holds.
// Prints lost / duplicated / dead-lettered counts.
//
// CI size: 10 s of faults. FERRY_NETFAULTS_LARGE=1: a minute.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/netfaults/delivery_audit.h"
#include "tests/netfaults/netns.h"
#include "tests/netfaults/steady_producer.h"
#include "tests/netfaults/toxiproxy.h"

namespace ferry::testing {
namespace {

// The test has its network namespace to itself: a fixed port is free.
constexpr int kSlowListenerPort = 19094;
constexpr int kPartitions = 8;
constexpr int kBudget = 200;  // max_buffered_events: small, so fetching pauses often
// ferry's debug line when its buffers fill and it stops taking records.
constexpr char kHolds[] = "buffers full: holding records back";

bool Large() { return std::getenv("FERRY_NETFAULTS_LARGE") != nullptr; }

int64_t CountOf(const std::string& log, const std::string& text) {
  int64_t count = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++count;
  return count;
}

// The largest `name=` value over all progress lines of a ferry log.
int64_t MaxProgressValue(const std::string& log, const std::string& name) {
  int64_t most = -1;
  const std::string key = " " + name + "=";
  for (size_t at = log.find(key); at != std::string::npos; at = log.find(key, at + 1)) {
    const size_t start = at + key.size();
    const size_t end = log.find_first_not_of("0123456789", start);
    int64_t value = 0;
    if (absl::SimpleAtoi(log.substr(start, end - start), &value)) most = std::max(most, value);
  }
  return most;
}

// VmHWM (peak resident set) of a running process, in KiB; -1 if unknown.
int64_t PeakRssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = -1;
    if (fields.size() >= 2 && absl::SimpleAtoi(fields[1], &kib)) return kib;
  }
  return -1;
}

class SlowBrokerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ferry's pause/resume lines are debug lines; every ferry started here
    // inherits this (set before any thread of the test runs).
    setenv("FERRY_LOG_LEVEL", "debug", 1);
    absl::StatusOr<std::unique_ptr<Toxiproxy>> toxiproxy = Toxiproxy::Start("slow_broker");
    if (!toxiproxy.ok()) {
      error_ = new std::string(toxiproxy.status().ToString());
      return;
    }
    toxiproxy_ = toxiproxy->release();
    absl::StatusOr<int> proxy =
        toxiproxy_->CreateProxy("broker", absl::StrCat("127.0.0.1:", kSlowListenerPort));
    if (!proxy.ok()) {
      error_ = new std::string(proxy.status().ToString());
      return;
    }
    proxy_port_ = *proxy;
    KafkaBroker::Options options;
    options.extra_listeners = {{"SLOW", kSlowListenerPort, proxy_port_}};
    absl::StatusOr<std::unique_ptr<KafkaBroker>> broker = KafkaBroker::Start(options);
    if (!broker.ok()) {
      error_ = new std::string(broker.status().ToString());
      return;
    }
    broker_ = broker->release();
  }
  static void TearDownTestSuite() {
    delete broker_;
    broker_ = nullptr;
    delete toxiproxy_;
    toxiproxy_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(error_, nullptr) << *error_;
    ASSERT_NE(broker_, nullptr);
  }

  static inline Toxiproxy* toxiproxy_ = nullptr;
  static inline KafkaBroker* broker_ = nullptr;
  static inline int proxy_port_ = 0;
  static inline std::string* error_ = nullptr;
};

TEST_F(SlowBrokerTest, KeepsGoingPausesAndResumesWithinBudget) {
  const std::string topic = "slow";
  const std::string group = "ferry-slow";
  ASSERT_TRUE(broker_->CreateTopic(topic, kPartitions).ok());
  ASSERT_TRUE(broker_->CreateTopic("slow-dlq", 1).ok());
  absl::StatusOr<PacketFilter> filter = PacketFilter::Create();
  ASSERT_TRUE(filter.ok()) << filter.status();
  ASSERT_TRUE(Produce(broker_->bootstrap(), topic, 2000, 100, kPartitions).ok());

  absl::StatusOr<Worker> worker =
      StartWorker("slow-w", 32, 0, {"--work_us=2000", "--handler_threads=4"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string config = FerryConfig(
      absl::StrCat("127.0.0.1:", proxy_port_), group, topic,
      absl::StrCat("127.0.0.1:", worker->port), /*streams=*/2,
      absl::StrCat("budgets:\n  max_buffered_events: ", kBudget,
                   "\n  resume_fraction: 0.5\n"
                   "failures:\n  dead_letter_topic: slow-dlq\n"),
      /*progress_interval=*/"200ms");
  // ~150 records/s: under what ferry manages at this budget even while the
  // broker is slow (a resume after a long hold waits for a new fetch), so the
  // stream drains once the faults end.
  SteadyProducer producer(broker_->bootstrap(), topic, kPartitions, 50);
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-slow");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ASSERT_TRUE(PollUntil([&] { return LastProgressValue(ferry->Log(), "acked") >= 500; },
                        absl::Seconds(60)))
      << LogTail(*ferry);

  // The broker turns slow and lossy.
  ASSERT_TRUE(toxiproxy_->AddToxic("broker", LatencyToxic(ToxicStream::kDownstream, 300, 200)).ok());
  ASSERT_TRUE(filter->Lose(proxy_port_, 1).ok());
  const int64_t acked_before = LastProgressValue(ferry->Log(), "acked");
  const int64_t pauses_before = CountOf(ferry->Log(), kHolds);
  const absl::Duration slow_for = Large() ? absl::Minutes(1) : absl::Seconds(10);
  PollUntil([&] { return ferry->TryWait().has_value(); }, slow_for);  // the fault's duration
  ASSERT_FALSE(ferry->TryWait().has_value()) << "ferry exited\n" << LogTail(*ferry);
  const int64_t acked_slow = LastProgressValue(ferry->Log(), "acked") - acked_before;
  const int64_t pauses_slow = CountOf(ferry->Log(), kHolds) - pauses_before;
  ASSERT_TRUE(toxiproxy_->RemoveToxic("broker", LatencyToxic(ToxicStream::kDownstream, 0).name).ok());
  ASSERT_TRUE(filter->Heal(proxy_port_).ok());

  const int64_t produced = 2000 + producer.Stop();
  ASSERT_TRUE(producer.error().empty()) << producer.error();
  absl::StatusOr<test_tools::GroupProgress> done = WaitAllCommitted(
      broker_->bootstrap(), topic, group, produced, *ferry, absl::Seconds(300));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << LogTail(*ferry);
  const int64_t peak_rss_kib = PeakRssKib(ferry->pid());
  absl::StatusOr<int> exit = Terminate(*ferry, absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(*exit, 0) << LogTail(*ferry);
  EXPECT_EQ(StopWorker(*worker), 0);

  const std::string log = ferry->Log();
  // A hold ends when the buffers drain, whether or not it lasted long
  // enough to pause librdkafka (core/kafka/flow_control.h).
  const int64_t pauses = CountOf(log, kHolds);
  const int64_t resumes = CountOf(log, "buffers drained: ");
  const int64_t max_buffered = MaxProgressValue(log, "buffered");
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(broker_->bootstrap(), topic);
  ASSERT_TRUE(end.ok()) << end.status();
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(broker_->bootstrap(), "slow-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  const DeliveryAudit audit = AuditDeliveries(*handled, *end, *dead);
  std::cout << "slow broker result: " << audit.Summary() << " slow_for=" << slow_for
            << " acked_while_slow=" << acked_slow << " pauses=" << pauses
            << " pauses_while_slow=" << pauses_slow << " resumes=" << resumes
            << " max_buffered=" << max_buffered << " budget=" << kBudget
            << " peak_rss_mib=" << peak_rss_kib / 1024 << std::endl;

  EXPECT_GT(acked_slow, 0) << "ferry stalled while the broker was slow";
  EXPECT_GT(pauses, 0) << "the budget never filled: the test proves no pause";
  // Every pause was followed by a resume: all was committed, so the buffers
  // drained, and the poll loop resumes within a round of that.
  EXPECT_EQ(resumes, pauses);
  EXPECT_LE(max_buffered, kBudget + 1) << "buffered events over the budget";
  EXPECT_GT(peak_rss_kib, 0);
  EXPECT_LT(peak_rss_kib, 256 * 1024) << "ferry's peak RSS";
  EXPECT_EQ(audit.events, produced);
  EXPECT_EQ(audit.lost, 0);
  EXPECT_EQ(audit.dead_lettered, 0);
  EXPECT_EQ(audit.order_violations, 0);
  for (const std::string& problem : audit.problems) ADD_FAILURE() << problem;
  EXPECT_LE(audit.duplicated, kBudget) << "redelivery without a rebalance";
}

}  // namespace
}  // namespace ferry::testing
