// Protecting what the workers call (issue 21), end to end: the ferry binary,
// example workers that simulate a downstream (a database with a fixed pool,
// a service that is down for a while) and the mock cluster.
//   * concurrency: adaptive keeps a pooled downstream near its unloaded
//     latency, where the fixed default overloads it, at about the same
//     throughput;
//   * rate_limit holds its rate over 20 s;
//   * circuit_breaker: an outage of the downstream dead-letters nothing and
//     every offset is committed after it recovers (without the breaker the
//     events burn their attempts into the dead-letter topic);
//   * bad rate_limit / concurrency / circuit_breaker values stop ferry with
//     the file and line.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kPoll = absl::Milliseconds(100);

// FerryConfig's processor with more settings ("    key: value\n" lines).
std::string WithProcessorSettings(std::string config, const std::string& settings) {
  const std::string anchor = "    timeout: 60s\n";
  const size_t at = config.find(anchor);
  config.insert(at + anchor.size(), settings);
  return config;
}

int64_t Median(std::vector<int64_t> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// ---- Adaptive concurrency against a database with a fixed pool ----

constexpr int kPoolSize = 16;
// Each event's work, spread over +-20% as queries vary (without any spread
// the pool works in lockstep rounds, and an event that just misses a slot
// waits a whole round however short the queue). Long enough that the
// scheduling noise of a busy test machine is small beside it; the pool
// then does 800 events/s.
constexpr int64_t kWorkUs = 10000;
constexpr double kJitter = 0.2;

// One run of ferry over `topic` against a fresh pooled worker.
struct PoolRun {
  double events_per_second = 0;  // handler starts over the span of the run
  int64_t p50_us = 0;            // the worker's handler latency
  int64_t p99_us = 0;
  // The p99 latency when nothing waits for a slot: the p99 of the work as
  // slept (about kWorkUs x 1.2), like for like with p99_us.
  int64_t unloaded_us = 0;
  // The most events the worker held on one of its two streams at once
  // (catches a spike of the limit between two GetStatus samples).
  int64_t max_held = 0;
  // ferry's in flight and concurrency limit (GetStatus) while the backlog
  // lasted.
  int64_t median_in_flight = -1;
  int64_t median_limit = -1;
  bool adaptive = false;  // GetStatus's concurrency_adaptive
  std::vector<int64_t> in_flight_samples;
  std::vector<int64_t> limit_samples;
};

// The middle half of `samples`: the run with its ramp-up and drain cut off.
int64_t MiddleMedian(const std::vector<int64_t>& samples) {
  if (samples.size() < 4) return Median(samples);
  return Median(std::vector<int64_t>(samples.begin() + samples.size() / 4,
                                     samples.end() - samples.size() / 4));
}

std::string Describe(const std::string& mode, const PoolRun& run) {
  return absl::StrCat(mode, ": ", static_cast<int64_t>(run.events_per_second),
                      " events/s, worker latency p50 ", run.p50_us / 1000.0, " ms, p99 ",
                      run.p99_us / 1000.0, " ms (unloaded p99 ", run.unloaded_us / 1000.0,
                      " ms), ferry in flight median ", run.median_in_flight,
                      ", concurrency limit median ", run.median_limit,
                      run.adaptive ? " (adaptive)" : " (fixed)",
                      ", most held on one worker stream ", run.max_held);
}

void RunAgainstPool(const MockCluster& cluster, const std::string& topic, int64_t events,
                    const std::string& concurrency, PoolRun* run) {
  absl::StatusOr<Worker> worker = StartWorker(
      topic, 256, 0,
      {absl::StrCat("--pool_size=", kPoolSize), absl::StrCat("--work_us=", kWorkUs),
       absl::StrCat("--pool_jitter=", kJitter), "--handler_threads=512", "--max_run=0"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string group = topic + "-group";
  absl::StatusOr<Subprocess> ferry = StartFerry(
      WithProcessorSettings(FerryConfig(cluster.bootstrap, group, topic, WorkerTarget(*worker), 2),
                            "    max_in_flight: 256\n" + concurrency),
      "ferry-" + topic);
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const int port = WaitForControlPort(*ferry);
  ASSERT_GT(port, 0) << LogTail(*ferry);

  // Sample ferry's in-flight count and concurrency limit until everything
  // is committed.
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (true) {
    ASSERT_FALSE(ferry->TryWait().has_value()) << LogTail(*ferry);
    absl::StatusOr<v1::GetStatusResponse> status = GetFerryStatus(port);
    if (status.ok() && status->processors_size() == 1 && status->processors(0).in_flight() > 0) {
      const v1::ProcessorStatus& processor = status->processors(0);
      run->in_flight_samples.push_back(processor.in_flight());
      run->limit_samples.push_back(processor.concurrency_limit());
      run->adaptive = processor.concurrency_adaptive();
    }
    absl::StatusOr<test_tools::GroupProgress> progress =
        test_tools::ReadGroupProgress(cluster.bootstrap, topic, group);
    if (progress.ok() && progress->AllCommitted() && progress->TotalEnd() == events) break;
    ASSERT_LT(absl::Now(), deadline) << "not all committed\n" << LogTail(*ferry);
    absl::SleepFor(absl::Milliseconds(200));  // polling ferry and the broker
  }
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(StopWorker(*worker), 0);

  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  ASSERT_EQ(handled->size(), static_cast<size_t>(events)) << "every event handled once";
  int64_t first = handled->front().monotonic_ns;
  int64_t last = first;
  for (const HandledEvent& event : *handled) {
    first = std::min(first, event.monotonic_ns);
    last = std::max(last, event.monotonic_ns);
  }
  ASSERT_GT(last, first);
  run->events_per_second = static_cast<double>(events - 1) * 1e9 / (last - first);
  const std::map<std::string, int64_t> stats = ReadStats(worker->stats_path);
  ASSERT_EQ(stats.count("latency_p99_us"), 1u) << ReadFile(worker->stats_path);
  EXPECT_EQ(stats.at("latency_count"), events);
  run->p50_us = stats.at("latency_p50_us");
  run->p99_us = stats.at("latency_p99_us");
  run->unloaded_us = stats.at("service_p99_us");
  run->max_held = stats.at("max_held");
  EXPECT_GE(run->unloaded_us, kWorkUs);
  // The middle of the run: the backlog was there throughout, not ramping
  // up at the start nor draining at the end.
  run->median_in_flight = MiddleMedian(run->in_flight_samples);
  run->median_limit = MiddleMedian(run->limit_samples);
}

TEST(DownstreamTest, AdaptiveConcurrencyKeepsAPooledDownstreamNearItsUnloadedLatency) {
  // 4000 keys, so that key order never limits what is in flight: with 512
  // credit (2 streams x 256) the fixed default sends far more than the pool
  // holds.
  constexpr int kEvents = 8000;  // about 5 s at the pool's pace
  constexpr int kKeys = 4000;
  constexpr int kPartitions = 4;
  absl::StatusOr<MockCluster> cluster =
      StartMockClusterWithTopics({"pool-fixed", "pool-adaptive"}, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "pool-fixed", kEvents, kKeys, kPartitions).ok());
  ASSERT_TRUE(Produce(cluster->bootstrap, "pool-adaptive", kEvents, kKeys, kPartitions).ok());

  PoolRun fixed;
  ASSERT_NO_FATAL_FAILURE(RunAgainstPool(*cluster, "pool-fixed", kEvents, "", &fixed));
  std::cout << Describe("fixed   ", fixed) << std::endl;
  PoolRun adaptive;
  ASSERT_NO_FATAL_FAILURE(RunAgainstPool(*cluster, "pool-adaptive", kEvents,
                                         "    concurrency: adaptive\n", &adaptive));
  std::cout << Describe("adaptive", adaptive) << std::endl;
  std::cout << "adaptive, every 200 ms: concurrency limit "
            << absl::StrJoin(adaptive.limit_samples, " ") << "\n  in flight "
            << absl::StrJoin(adaptive.in_flight_samples, " ") << std::endl;
  ::testing::Test::RecordProperty("fixed", Describe("fixed", fixed));
  ::testing::Test::RecordProperty("adaptive", Describe("adaptive", adaptive));

  // The fixed default queues hundreds of events at a pool of 16.
  EXPECT_GT(fixed.p99_us, 2 * fixed.unloaded_us) << Describe("fixed", fixed);
  EXPECT_GT(fixed.median_in_flight, 16 * kPoolSize) << Describe("fixed", fixed);
  EXPECT_FALSE(fixed.adaptive);
  EXPECT_EQ(fixed.median_limit, 2 * 256) << "fixed: streams x max_in_flight";
  // Adaptive settles near the pool size, where latency stays within twice
  // the unloaded one...
  EXPECT_LE(adaptive.p99_us, 2 * adaptive.unloaded_us) << Describe("adaptive", adaptive);
  EXPECT_GE(adaptive.median_in_flight, kPoolSize / 2) << Describe("adaptive", adaptive);
  EXPECT_LE(adaptive.median_in_flight, 4 * kPoolSize) << Describe("adaptive", adaptive);
  EXPECT_TRUE(adaptive.adaptive);
  EXPECT_GE(adaptive.median_limit, kPoolSize / 2) << Describe("adaptive", adaptive);
  EXPECT_LE(adaptive.median_limit, 4 * kPoolSize) << Describe("adaptive", adaptive);
  // Settles: in the middle of the run at least 80% of the samples are
  // within [pool / 2, 2 x pool] (Vegas aims a few events above the pool;
  // its periodic probe halves the limit for a moment).
  const std::vector<int64_t>& limits = adaptive.limit_samples;
  ASSERT_GE(limits.size(), 10u) << "too few GetStatus samples to judge";
  const std::vector<int64_t> middle(limits.begin() + limits.size() / 4,
                                    limits.end() - limits.size() / 4);
  const int64_t near_pool = std::count_if(middle.begin(), middle.end(), [](int64_t limit) {
    return limit >= kPoolSize / 2 && limit <= 2 * kPoolSize;
  });
  EXPECT_GE(near_pool * 10, static_cast<int64_t>(middle.size()) * 8)
      << "the adaptive limit did not settle near the pool size: "
      << absl::StrJoin(middle, " ");
  // ...and the pool stays busy: the same work gets done.
  EXPECT_GE(adaptive.events_per_second, 0.8 * fixed.events_per_second)
      << Describe("fixed", fixed) << "\n" << Describe("adaptive", adaptive);
}

// ---- Rate limit ----

TEST(DownstreamTest, RateLimitHoldsWithinFivePercentOverTwentySeconds) {
  constexpr int kRate = 200;
  constexpr int kEvents = 6000;  // 30 s at the limit: the backlog outlasts the window
  constexpr int kPartitions = 4;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("limited", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "limited", kEvents, 1000, kPartitions).ok());
  // A fast worker: no work, plenty of credit; each line written through so
  // the test can read the record while it runs.
  absl::StatusOr<Worker> worker = StartWorker("fast", 256, 0, {"--record_flush"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      WithProcessorSettings(
          FerryConfig(cluster->bootstrap, "limited-group", "limited", WorkerTarget(*worker), 2),
          absl::StrCat("    rate_limit: ", kRate, "\n")),
      "ferry-limited");
  ASSERT_TRUE(ferry.ok()) << ferry.status();

  // The window is [first handler start + 2 s, + 22 s): the bucket's initial
  // burst and ferry's start are outside it. Wait until the worker has
  // started an event past its end.
  const absl::Duration kSkip = absl::Seconds(2);
  const absl::Duration kWindow = absl::Seconds(20);
  std::vector<HandledEvent> handled;
  int64_t first_ns = 0;
  const bool past_window = PollUntil(
      [&] {
        if (ferry->TryWait().has_value()) return true;  // failed below, with its log
        absl::StatusOr<std::vector<HandledEvent>> read = ReadHandledEvents(worker->record_path);
        if (!read.ok() || read->empty()) return false;
        handled = *std::move(read);
        first_ns = handled.front().monotonic_ns;
        int64_t last_ns = first_ns;
        for (const HandledEvent& e : handled) {
          first_ns = std::min(first_ns, e.monotonic_ns);
          last_ns = std::max(last_ns, e.monotonic_ns);
        }
        return last_ns - first_ns >= absl::ToInt64Nanoseconds(kSkip + kWindow) ||
               handled.size() == static_cast<size_t>(kEvents);
      },
      absl::Seconds(60), absl::Milliseconds(500));
  ASSERT_FALSE(ferry->TryWait().has_value()) << "ferry exited\n" << LogTail(*ferry);
  // GetStatus shows the configured limit and its default burst (a tenth of
  // a second's worth).
  absl::StatusOr<v1::GetStatusResponse> status = GetFerryStatus(WaitForControlPort(*ferry));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->processors_size(), 1);
  EXPECT_EQ(status->processors(0).rate_limit_events_per_second(), kRate);
  EXPECT_EQ(status->processors(0).rate_limit_burst(), kRate / 10);
  EXPECT_FALSE(status->processors(0).rate_limit_overridden());
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(StopWorker(*worker), 0);
  ASSERT_TRUE(past_window) << handled.size() << " events handled in 60 s\n" << LogTail(*ferry);
  ASSERT_LT(handled.size(), static_cast<size_t>(kEvents))
      << "all " << kEvents << " events were handled before " << kSkip + kWindow
      << " had passed: the rate limit was not enforced";

  const int64_t from = first_ns + absl::ToInt64Nanoseconds(kSkip);
  const int64_t to = from + absl::ToInt64Nanoseconds(kWindow);
  int64_t in_window = 0;
  for (const HandledEvent& e : handled) {
    if (e.monotonic_ns >= from && e.monotonic_ns < to) ++in_window;
  }
  const double rate = in_window / absl::ToDoubleSeconds(kWindow);
  std::cout << "rate_limit " << kRate << "/s: " << in_window << " events in " << kWindow
            << " = " << rate << " events/s\n";
  ::testing::Test::RecordProperty("rate_limit_measured", absl::StrCat(rate));
  EXPECT_NEAR(rate, kRate, kRate * 0.05);
}

// ---- Circuit breaker ----

struct OutageRun {
  std::vector<test_tools::ConsumedRecord> dead_letters;
  std::vector<HandledEvent> handled;
  std::string ferry_log;
  bool saw_open = false;          // GetStatus said "open" during the outage
  v1::ProcessorStatus after;      // GetStatus once all was committed
};

// `events` over 20 keys against a worker that answers RETRY to everything
// for its first 10 s; dead letters to `topic`-dlq, 3 attempts, 100ms backoff.
void RunThroughOutage(const std::string& topic, int events, const std::string& breaker,
                      OutageRun* run) {
  absl::StatusOr<MockCluster> cluster = StartMockClusterWithTopics({topic, topic + "-dlq"}, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, topic, events, 20, 2).ok());
  absl::StatusOr<Worker> worker = StartWorker(topic, 16, 0, {"--unavailable_ms=10000"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string group = topic + "-group";
  absl::StatusOr<Subprocess> ferry = StartFerry(
      WithProcessorSettings(
          FerryConfig(cluster->bootstrap, group, topic, WorkerTarget(*worker), 2,
                      absl::StrCat("failures:\n  dead_letter_topic: ", topic, "-dlq\n")),
          "    max_attempts: 3\n    retry_backoff: 100ms\n" + breaker),
      "ferry-" + topic);
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  const int port = WaitForControlPort(*ferry);
  ASSERT_GT(port, 0) << LogTail(*ferry);
  // ferry shows the breaker open while the downstream is down (the outage
  // lasts 10 s from the first event).
  auto processor_status = [&]() -> absl::StatusOr<v1::ProcessorStatus> {
    absl::StatusOr<v1::GetStatusResponse> status = GetFerryStatus(port);
    if (!status.ok()) return status.status();
    if (status->processors_size() != 1) return absl::NotFoundError("no processor in GetStatus");
    return status->processors(0);
  };
  if (!breaker.empty()) {
    run->saw_open = PollUntil(
        [&] {
          absl::StatusOr<v1::ProcessorStatus> status = processor_status();
          return status.ok() && status->circuit_breaker() == "open";
        },
        absl::Seconds(10), kPoll);
  }
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, topic, group, events, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  absl::StatusOr<v1::ProcessorStatus> after = processor_status();
  ASSERT_TRUE(after.ok()) << after.status();
  run->after = *after;
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(StopWorker(*worker), 0);
  run->ferry_log = ferry->Log();
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster->bootstrap, topic + "-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  run->dead_letters = *std::move(dead);
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  run->handled = *std::move(handled);
}

int64_t CountAnswers(const std::vector<HandledEvent>& handled, const std::string& answer) {
  return std::count_if(handled.begin(), handled.end(),
                       [&](const HandledEvent& e) { return e.answer == answer; });
}

TEST(DownstreamTest, BreakerKeepsAnOutageOutOfTheDeadLetterTopic) {
  constexpr int kEvents = 200;
  OutageRun run;
  ASSERT_NO_FATAL_FAILURE(RunThroughOutage(
      "outage-breaker", kEvents,
      "    circuit_breaker: {min_outcomes: 10, open_for: 500ms, open_max: 2s}\n", &run));
  const int64_t retries = CountAnswers(run.handled, "RETRY");
  std::cout << "with the breaker: " << run.dead_letters.size() << " dead letters, " << retries
            << " RETRY answers during the outage\n";
  EXPECT_EQ(run.dead_letters.size(), 0u) << "an outage must not dead-letter with the breaker on";
  // Every event was answered OK once the downstream recovered.
  std::set<std::pair<std::string, int64_t>> ok;
  for (const HandledEvent& e : run.handled) {
    if (e.answer == "OK") ok.insert({e.key, e.sequence});
  }
  EXPECT_EQ(ok.size(), static_cast<size_t>(kEvents));
  // While open, nothing was sent: the outage saw the events in flight when
  // it opened and a few probes, not every event three times.
  EXPECT_LT(retries, kEvents) << "the breaker did not stop dispatch";

  // Status and log: it opened (at least once: a failed probe reopens it),
  // each transition logged once, and it ended closed.
  EXPECT_TRUE(run.saw_open) << "GetStatus never showed the breaker open";
  EXPECT_EQ(run.after.circuit_breaker(), "closed");
  EXPECT_GE(run.after.circuit_breaker_opened(), 1);
  auto count = [&](const std::string& text) {
    int64_t n = 0;
    for (size_t at = run.ferry_log.find(text); at != std::string::npos;
         at = run.ferry_log.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  const int64_t opened = count("circuit breaker of processor default opened");
  EXPECT_EQ(opened, run.after.circuit_breaker_opened()) << "one line per opening";
  EXPECT_EQ(count("circuit breaker of processor default half-open"), opened);
  EXPECT_EQ(count("circuit breaker of processor default closed"), 1);
  std::cout << "the breaker opened " << opened << " times\n";
}

TEST(DownstreamTest, WithoutTheBreakerAnOutageIsDeadLettered) {
  constexpr int kEvents = 100;
  OutageRun run;
  ASSERT_NO_FATAL_FAILURE(RunThroughOutage("outage-plain", kEvents, "", &run));
  std::cout << "without the breaker: " << run.dead_letters.size() << " dead letters, "
            << CountAnswers(run.handled, "RETRY") << " RETRY answers\n";
  EXPECT_GT(run.dead_letters.size(), 0u);
  for (const test_tools::ConsumedRecord& record : run.dead_letters) {
    EXPECT_EQ(record.Header("ferry.attempts"), "3");
    EXPECT_THAT(record.Header("ferry.error"), HasSubstr("injected: unavailable"));
  }
  // Each dead-lettered event used its three attempts at the worker.
  EXPECT_EQ(CountAnswers(run.handled, "RETRY"),
            3 * static_cast<int64_t>(run.dead_letters.size()));
  EXPECT_EQ(run.after.circuit_breaker(), "off");
  EXPECT_EQ(run.after.circuit_breaker_opened(), 0);
  EXPECT_EQ(run.ferry_log.find("circuit breaker"), std::string::npos);
}

// ---- Config errors ----

struct BadSetting {
  std::string yaml;  // processor lines, starting at line 9 of the file
  int line;          // where the error is
  std::string path;  // the key the error names
};

TEST(DownstreamTest, BadSettingsStopFerryWithTheirFileAndLine) {
  const BadSetting cases[] = {
      {"    rate_limit: -5\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: 0\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: .nan\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: .inf\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: 200/min\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: lots\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: [200]\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: {burst: 10}\n", 9, "processors[0].rate_limit"},
      {"    rate_limit: {events_per_second: 200, burst: -1}\n", 9,
       "processors[0].rate_limit.burst"},
      {"    concurrency: adaptve\n", 9, "processors[0].concurrency"},
      {"    concurrency: {mode: fixed, initial_limit: 5}\n", 9,
       "processors[0].concurrency.initial_limit"},
      {"    concurrency: {mode: adaptive, initial_limit: 0}\n", 9,
       "processors[0].concurrency.initial_limit"},
      {"    concurrency:\n      mode: adaptive\n      initial_limit: 10\n      min_limit: 30\n", 12,
       "processors[0].concurrency.min_limit"},
      {"    circuit_breaker: maybe\n", 9, "processors[0].circuit_breaker"},
      {"    circuit_breaker: {failure_ratio: 1.5}\n", 9,
       "processors[0].circuit_breaker.failure_ratio"},
      {"    circuit_breaker: {failure_ratio: .nan}\n", 9,
       "processors[0].circuit_breaker.failure_ratio"},
      {"    circuit_breaker: {min_outcomes: 0}\n", 9,
       "processors[0].circuit_breaker.min_outcomes"},
      {"    circuit_breaker: {probes: -1}\n", 9, "processors[0].circuit_breaker.probes"},
      {"    circuit_breaker: {open_for: 0s}\n", 9, "processors[0].circuit_breaker.open_for"},
      {"    circuit_breaker: {windw: 10s}\n", 9, "processors[0].circuit_breaker.windw"},
      {"    circuit_breaker:\n      open_for: 5s\n      open_max: 1s\n", 11,
       "processors[0].circuit_breaker.open_max"},
  };
  int n = 0;
  for (const BadSetting& bad : cases) {
    const std::string name = absl::StrCat("bad_guard_", n++);
    const std::string path = TempPath(name + ".yaml");
    WriteFile(path, absl::StrCat("kafka:\n"
                                 "  bootstrap.servers: 127.0.0.1:1\n"
                                 "  group.id: bad-guards\n"
                                 "topics:\n"
                                 "  - name: events\n"
                                 "processors:\n"
                                 "  - name: default\n"
                                 "    target: ipv4:127.0.0.1:1\n",
                                 bad.yaml));
    absl::StatusOr<Subprocess> ferry =
        Subprocess::Start({"server/ferry", "--config=" + path}, TempPath(name + ".log"));
    ASSERT_TRUE(ferry.ok()) << ferry.status();
    absl::StatusOr<int> exit = ferry->Wait(absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << "ferry kept running on\n" << bad.yaml << ferry->Log();
    EXPECT_EQ(*exit, 2) << bad.yaml << ferry->Log();
    EXPECT_THAT(ferry->Log(), HasSubstr(absl::StrCat(path, ":", bad.line, ": ", bad.path)))
        << bad.yaml;
    // The setting is known and its value refused (a ferry that did not know
    // rate_limit at all would also name the line).
    if (bad.path.find("windw") == std::string::npos) {
      EXPECT_THAT(ferry->Log(), Not(HasSubstr("unknown key"))) << bad.yaml;
    } else {
      EXPECT_THAT(ferry->Log(), HasSubstr("unknown key")) << bad.yaml;
    }
  }
}

}  // namespace
}  // namespace ferry::testing
