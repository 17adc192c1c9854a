// Network faults between ferry and its workers, through Toxiproxy
// (tests/netfaults/toxiproxy.h) on loopback, with real ferry, worker and
// mock-cluster processes:
//   * a worker host vanishes (its link drops every byte both ways, no FIN, no
//     RST) while it holds in-flight events: ferry notices within its
//     keepalive bound (processors[].keepalive, interval + timeout), and those
//     events are redelivered to the surviving worker, not timed out and
//     dead-lettered; nothing is lost;
//   * a worker is partitioned from ferry and comes back: its streams go, the
//     other worker takes over, and after healing ferry's streams reconnect to
//     it (it takes over in turn when the other worker is partitioned), with no
//     credit counted twice (no worker ever holds more than it granted) and no
//     partition stuck (everything commits, nothing left in flight).
// Each prints lost / duplicated / dead-lettered counts like the chaos test.
//
// Sizes (defaults fit CI, seconds each): FERRY_NETFAULTS_EVENTS scales the
// event count. Bigger by hand:
//   bazel test //tests/netfaults:worker_faults_test --test_output=streamed
//     --test_env=FERRY_NETFAULTS_EVENTS=40000
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/netfaults/delivery_audit.h"
#include "tests/netfaults/toxiproxy.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

// How often the tests poll state other processes change.
constexpr absl::Duration kPoll = absl::Milliseconds(20);

constexpr int kPartitions = 4;
constexpr int kStreams = 4;
constexpr int kCredit = 8;  // each worker's max_in_flight per stream
// The keepalive under test: a vanished worker is noticed within 2 s.
constexpr absl::Duration kKeepaliveBound = absl::Seconds(2);
// Scheduling slack on a loaded 2-core CI machine, still far below both the
// event timeout and the keepalive ferry had before (30 s + 10 s).
constexpr absl::Duration kSlack = absl::Seconds(4);
constexpr char kEventTimeout[] = "20s";

int64_t EventCount(int64_t fallback) {
  const char* value = std::getenv("FERRY_NETFAULTS_EVENTS");
  int64_t parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) && parsed > 0 ? parsed : fallback;
}

// A record's identity as kafka_tool produce writes it.
using RecordId = std::pair<std::string, int64_t>;  // key, sequence

// Lines of a worker's --record_starts file: "<key>\t<sequence>\t<ns>".
std::vector<RecordId> ReadStarts(const std::string& path) {
  std::vector<RecordId> starts;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    int64_t sequence = 0;
    if (fields.size() >= 3 && absl::SimpleAtoi(fields[1], &sequence)) {
      starts.emplace_back(fields[0], sequence);
    }
  }
  return starts;
}

// How many times ferry's log says a stream of processor `default` ended
// (cleanly closed or failed).
int StreamEnds(const Subprocess& ferry) {
  int ends = 0;
  for (absl::string_view line : absl::StrSplit(ferry.Log(), '\n')) {
    if (line.find("workers: default#") != absl::string_view::npos &&
        (line.find(": stream closed") != absl::string_view::npos ||
         line.find(": stream ended") != absl::string_view::npos)) {
      ++ends;
    }
  }
  return ends;
}

// The age of the oldest unfinished event in ferry's last progress line
// ("blocker=topic/p@offset age=4.2s"), or a negative duration.
absl::Duration BlockerAge(const Subprocess& ferry) {
  const std::string log = ferry.Log();
  const size_t line = log.rfind("progress:");
  if (line == std::string::npos) return absl::Seconds(-1);
  const size_t at = log.find(" age=", line);
  const size_t end = log.find('\n', line);
  if (at == std::string::npos || at > end) return absl::Seconds(-1);
  const size_t value = at + 5;
  absl::Duration age;
  const size_t unit = log.find('s', value);
  if (unit == std::string::npos ||
      !absl::ParseDuration(log.substr(value, unit + 1 - value), &age)) {
    return absl::Seconds(-1);
  }
  return age;
}

class WorkerFaultsTest : public ::testing::Test {
 protected:
  // A mock cluster with `topic` and `topic`-dlq, `events` records produced,
  // and Toxiproxy.
  void SetUpCluster(const std::string& topic, int64_t events, int keys) {
    topic_ = topic;
    absl::StatusOr<MockCluster> cluster =
        StartMockCluster(absl::StrCat(topic, ",", topic, "-dlq"), kPartitions);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::make_unique<MockCluster>(*std::move(cluster));
    ASSERT_TRUE(Produce(cluster_->bootstrap, topic, static_cast<int>(events), keys, kPartitions)
                    .ok());
    absl::StatusOr<std::unique_ptr<Toxiproxy>> toxiproxy = Toxiproxy::Start("toxiproxy");
    ASSERT_TRUE(toxiproxy.ok()) << toxiproxy.status();
    toxiproxy_ = *std::move(toxiproxy);
  }

  // A worker and a proxy named after it in front of it; the proxy's port.
  int StartProxiedWorker(const std::string& name, const std::vector<std::string>& flags,
                         Worker* out) {
    absl::StatusOr<Worker> worker = StartWorker(name, kCredit, 0, flags);
    EXPECT_TRUE(worker.ok()) << worker.status();
    if (!worker.ok()) return -1;
    absl::StatusOr<int> port =
        toxiproxy_->CreateProxy(name, absl::StrCat("127.0.0.1:", worker->port));
    EXPECT_TRUE(port.ok()) << port.status();
    *out = *std::move(worker);
    return port.value_or(-1);
  }

  // ferry dialing both proxies, keepalive 1 s + 1 s, failures dead-lettered.
  absl::StatusOr<Subprocess> StartFerryFor(int port_a, int port_b,
                                           const std::string& timeout = kEventTimeout) {
    std::string config = FerryConfig(
        cluster_->bootstrap, absl::StrCat(topic_, "-group"), topic_,
        absl::StrCat("ipv4:127.0.0.1:", port_a, ",127.0.0.1:", port_b), kStreams,
        absl::StrCat("failures:\n  dead_letter_topic: ", topic_, "-dlq\n"), "200ms");
    config.replace(config.find("    timeout: 60s\n"), 16,
                   absl::StrCat("    timeout: ", timeout,
                                "\n    keepalive:\n      interval: 1s\n      timeout: 1s\n"));
    return StartFerry(config, absl::StrCat("ferry-", topic_));
  }

  // Waits for everything committed; then in_flight 0 and all streams open.
  void ExpectAllCommitted(Subprocess& ferry, int64_t events) {
    absl::StatusOr<test_tools::GroupProgress> progress =
        WaitAllCommitted(cluster_->bootstrap, topic_, absl::StrCat(topic_, "-group"), events,
                         ferry, absl::Seconds(180));
    ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(ferry);
    EXPECT_TRUE(PollUntil(
        [&] {
          const std::string log = ferry.Log();
          return LastProgressValue(log, "in_flight") == 0 &&
                 LastProgressValue(log, "streams") == kStreams;
        },
        absl::Seconds(30), kPoll))
        << "in flight or streams missing after all committed\n"
        << LogTail(ferry);
  }

  // What happened to each record (tests/netfaults/delivery_audit.h): what
  // the workers recorded against the topic's end offsets and its dead-letter
  // topic. An audit that cannot read them counts lost = -1.
  DeliveryAudit Audit(const std::vector<HandledEvent>& handled) {
    absl::StatusOr<test_tools::OffsetMap> end =
        test_tools::ReadEndOffsets(cluster_->bootstrap, topic_);
    EXPECT_TRUE(end.ok()) << end.status();
    absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
        test_tools::ReadTopic(cluster_->bootstrap, absl::StrCat(topic_, "-dlq"));
    EXPECT_TRUE(dead.ok()) << dead.status();
    if (end.ok() && dead.ok()) return AuditDeliveries(handled, *end, *dead);
    DeliveryAudit unread;
    unread.lost = -1;
    return unread;
  }

  std::string topic_;
  std::unique_ptr<MockCluster> cluster_;
  std::unique_ptr<Toxiproxy> toxiproxy_;
};

TEST_F(WorkerFaultsTest, VanishedWorkerHostsEventsAreRedeliveredNotTimedOut) {
  const int64_t events = EventCount(2000);
  constexpr int kKeys = 200;
  SetUpCluster("vanish", events, kKeys);
  // `holder` starts every event and holds it (far past the event timeout);
  // it answers nothing, so whatever it gets must reach `survivor`. It takes
  // no runs: a run's later members would wait, unstarted, behind the first.
  Worker holder;
  Worker survivor;
  const int holder_port = StartProxiedWorker(
      "holder",
      {"--stall_rate=1", "--stall_ms=600000", "--handler_threads=64", "--record_flush",
       "--max_run=1",
       absl::StrCat("--record_starts=", TempPath("starts-holder"))},
      &holder);
  const int survivor_port = StartProxiedWorker(
      "survivor", {"--work_us=500", "--record_flush"}, &survivor);
  ASSERT_GT(holder_port, 0);
  ASSERT_GT(survivor_port, 0);
  // The survivor is unreachable at first, so every stream opens to the
  // holder, which fills all its credit.
  ASSERT_TRUE(toxiproxy_->SetEnabled("survivor", false).ok());
  absl::StatusOr<Subprocess> ferry = StartFerryFor(holder_port, survivor_port);
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const std::string starts_path = TempPath("starts-holder");
  ASSERT_TRUE(PollUntil([&] { return ReadStarts(starts_path).size() >= kStreams * kCredit; },
                        absl::Seconds(60), kPoll))
      << "the holder did not fill its credit\n"
      << LogTail(*ferry);
  ASSERT_TRUE(toxiproxy_->SetEnabled("survivor", true).ok());
  // The holder keeps them for a while (nothing flows on its streams but
  // pings), so ferry's keepalive must go on probing idle streams.
  ASSERT_TRUE(PollUntil([&] { return BlockerAge(*ferry) >= 4 * kKeepaliveBound; },
                        absl::Seconds(30), kPoll))
      << LogTail(*ferry);

  // The holder's host vanishes.
  // Nothing ended the idle streams meanwhile: the SDK's gRPC server permits
  // ferry's pings (gRPC's default answers them with GOAWAY too_many_pings).
  const int ends_before = StreamEnds(*ferry);
  EXPECT_EQ(ends_before, 0) << LogTail(*ferry);
  const absl::Time vanished = absl::Now();
  ASSERT_TRUE(toxiproxy_->Blackhole("holder").ok());
  ASSERT_TRUE(PollUntil([&] { return StreamEnds(*ferry) >= ends_before + kStreams; },
                        kKeepaliveBound + kSlack + absl::Seconds(30), kPoll))
      << LogTail(*ferry);
  const absl::Duration noticed = absl::Now() - vanished;
  std::cout << "vanished worker: ferry noticed after " << absl::FormatDuration(noticed)
            << " (keepalive bound " << absl::FormatDuration(kKeepaliveBound) << ")" << std::endl;
  EXPECT_LE(noticed, kKeepaliveBound + kSlack);

  ExpectAllCommitted(*ferry, events);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  const int64_t redelivered = LastProgressValue(ReadFile(ferry->log_path()), "redelivered");
  EXPECT_FALSE(absl::StrContains(ferry->Log(), "is not above the keepalive bound"));
  ASSERT_EQ(StopWorker(survivor), 0);
  holder.process.Signal(SIGKILL);  // still holding (its stall outlives the test)
  ASSERT_TRUE(holder.process.Wait(absl::Seconds(10)).ok());

  // What happened to each record.
  const std::vector<RecordId> held = ReadStarts(starts_path);
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(survivor.record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  std::set<RecordId> acked;
  for (const HandledEvent& event : *handled) {
    if (event.answer == "OK") acked.emplace(event.key, event.sequence);
  }
  const DeliveryAudit audit = Audit(*handled);
  int64_t held_not_redelivered = 0;
  for (const RecordId& id : held) held_not_redelivered += acked.count(id) == 0 ? 1 : 0;
  const int64_t runs = static_cast<int64_t>(held.size() + handled->size());
  std::cout << "vanished worker result: lost=" << audit.lost
            << " duplicated=" << (runs - static_cast<int64_t>(acked.size()))
            << " (handler runs beyond the first per record) dead_lettered=" << audit.dead_lettered
            << " held_by_vanished=" << held.size() << " redelivered=" << redelivered
            << " acked=" << acked.size() << std::endl;
  EXPECT_EQ(audit.events, events);
  EXPECT_EQ(audit.lost, 0) << absl::StrJoin(audit.problems, "; ");
  EXPECT_EQ(audit.dead_lettered, 0) << "a vanished worker's events are redelivered, not timed out";
  EXPECT_EQ(held_not_redelivered, 0);
  EXPECT_GE(redelivered, static_cast<int64_t>(held.size()));
  EXPECT_EQ(ReadStats(survivor.stats_path)["credit_violations"], 0);
}

// An event timeout not above the keepalive bound cannot keep the promise
// (a vanished worker's events would time out first): ferry says so at start.
TEST_F(WorkerFaultsTest, TimeoutNotAboveTheKeepaliveBoundIsWarnedAtStartup) {
  SetUpCluster("short", 1, 1);
  absl::StatusOr<int> unreachable = PickFreePort();
  ASSERT_TRUE(unreachable.ok());
  absl::StatusOr<Subprocess> ferry = StartFerryFor(*unreachable, *unreachable, "2s");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  EXPECT_TRUE(PollUntil(
      [&] {
        return absl::StrContains(ferry->Log(),
                                 "WARN workers: processor default: timeout 2s is not above the "
                                 "keepalive bound 2s");
      },
      absl::Seconds(30), kPoll))
      << LogTail(*ferry);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
}

TEST_F(WorkerFaultsTest, PartitionedWorkerComesBackWithoutDoubleCreditOrStuckPartitions) {
  const int64_t events = EventCount(4000);
  constexpr int kKeys = 400;
  SetUpCluster("partition", events, kKeys);
  // 2 handler threads x 10 ms: each worker handles about 200 events a
  // second, so the backlog lasts through both partitions.
  const std::vector<std::string> flags = {"--work_us=10000", "--handler_threads=2",
                                          "--record_flush"};
  Worker a;
  Worker b;
  std::vector<std::string> flags_a = flags;
  flags_a.push_back(absl::StrCat("--record_starts=", TempPath("starts-a")));
  std::vector<std::string> flags_b = flags;
  flags_b.push_back(absl::StrCat("--record_starts=", TempPath("starts-b")));
  const int port_a = StartProxiedWorker("a", flags_a, &a);
  const int port_b = StartProxiedWorker("b", flags_b, &b);
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);
  ASSERT_TRUE(toxiproxy_->SetEnabled("b", false).ok());  // every stream opens to a
  absl::StatusOr<Subprocess> ferry = StartFerryFor(port_a, port_b);
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ASSERT_TRUE(PollUntil([&] { return !ReadStarts(TempPath("starts-a")).empty(); },
                        absl::Seconds(60), kPoll))
      << LogTail(*ferry);
  ASSERT_TRUE(toxiproxy_->SetEnabled("b", true).ok());

  // a is partitioned: its streams go and b takes over; then a comes back.
  int ends = StreamEnds(*ferry);
  ASSERT_TRUE(toxiproxy_->Blackhole("a").ok());
  ASSERT_TRUE(PollUntil([&] { return StreamEnds(*ferry) >= ends + kStreams; },
                        kKeepaliveBound + kSlack, kPoll))
      << "a's streams did not end within the keepalive bound\n"
      << LogTail(*ferry);
  const size_t b_before = ReadStarts(TempPath("starts-b")).size();
  ASSERT_TRUE(PollUntil([&] { return ReadStarts(TempPath("starts-b")).size() > b_before; },
                        absl::Seconds(30), kPoll))
      << "b did not take over\n"
      << LogTail(*ferry);
  ASSERT_TRUE(toxiproxy_->Heal("a").ok());

  // b is partitioned in turn: the streams must reconnect to a. (Some may be
  // on a already: a stream that ends for any reason reopens on any READY
  // address, so b holds at least one stream but perhaps not all four.)
  ends = StreamEnds(*ferry);
  const size_t a_before = ReadStarts(TempPath("starts-a")).size();
  ASSERT_TRUE(toxiproxy_->Blackhole("b").ok());
  ASSERT_TRUE(PollUntil([&] { return StreamEnds(*ferry) > ends; }, kKeepaliveBound + kSlack, kPoll))
      << "b's streams did not end within the keepalive bound\n"
      << LogTail(*ferry);
  ASSERT_TRUE(PollUntil([&] { return ReadStarts(TempPath("starts-a")).size() > a_before; },
                        absl::Seconds(60), kPoll))
      << "ferry did not reconnect to a after it came back\n"
      << LogTail(*ferry);
  ASSERT_TRUE(toxiproxy_->Heal("b").ok());

  ExpectAllCommitted(*ferry, events);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  const int64_t redelivered = LastProgressValue(ReadFile(ferry->log_path()), "redelivered");
  ASSERT_EQ(StopWorker(a), 0);
  ASSERT_EQ(StopWorker(b), 0);

  std::set<RecordId> acked;
  std::vector<HandledEvent> all;
  for (const Worker* worker : {&a, &b}) {
    absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
    ASSERT_TRUE(handled.ok()) << handled.status();
    all.insert(all.end(), handled->begin(), handled->end());
    for (const HandledEvent& event : *handled) {
      if (event.answer == "OK") acked.emplace(event.key, event.sequence);
    }
  }
  const DeliveryAudit audit = Audit(all);
  const int64_t runs = static_cast<int64_t>(all.size());
  std::map<std::string, int64_t> stats_a = ReadStats(a.stats_path);
  std::map<std::string, int64_t> stats_b = ReadStats(b.stats_path);
  std::cout << "partitioned worker result: lost=" << audit.lost
            << " duplicated=" << (runs - static_cast<int64_t>(acked.size()))
            << " (handler runs beyond the first per record) dead_lettered=" << audit.dead_lettered
            << " redelivered=" << redelivered << " acked=" << acked.size()
            << " max_held a/b=" << stats_a["max_held"] << "/" << stats_b["max_held"]
            << " credit_violations a/b=" << stats_a["credit_violations"] << "/"
            << stats_b["credit_violations"] << std::endl;
  EXPECT_EQ(audit.events, events);
  EXPECT_EQ(audit.lost, 0) << absl::StrJoin(audit.problems, "; ");
  EXPECT_EQ(audit.dead_lettered, 0);
  EXPECT_GT(redelivered, 0);
  // Credit: no stream ever got more than the worker granted on it.
  EXPECT_EQ(stats_a["credit_violations"], 0);
  EXPECT_EQ(stats_b["credit_violations"], 0);
  EXPECT_LE(stats_a["max_held"], kCredit);
  EXPECT_LE(stats_b["max_held"], kCredit);
}

}  // namespace
}  // namespace ferry::testing
