// The metrics endpoint: state gauges computed at scrape time, the process
// collector, the HTTP server, and the naming rules every ferry metric keeps.
#include "server/observability/metrics.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "core/kafka/consumer_stats.h"
#include "core/engine/engine_stats.h"
#include "tests/tools/metrics_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/workers/worker_pool_stats.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

class FixedClock final : public Clock {
 public:
  explicit FixedClock(absl::Time now) : now_(now) {}
  absl::Time Now() const override { return now_; }

 private:
  absl::Time now_;
};

Config TestConfig() {
  Config config;
  TopicConfig topic;
  topic.name = "orders";
  config.topics.push_back(topic);
  ProcessorConfig billing;
  billing.name = "billing";
  billing.target = "ipv4:127.0.0.1:1";
  billing.streams = 4;
  config.processors.push_back(billing);
  config.max_buffered_events = 1000;
  config.max_buffered_bytes = 1 << 20;
  config.lane_count = 16;
  config.lane_capacity = 50;
  return config;
}

Exposition Serialize(const prometheus::Collectable& collectable) {
  const std::string text = prometheus::TextSerializer().Serialize(collectable.Collect());
  absl::StatusOr<Exposition> parsed = ParseExposition(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  return parsed.ok() ? *parsed : Exposition();
}

TEST(MetricsTest, CommittedPositionPrefersWhatFerryCommitted) {
  PartitionSnapshot partition;
  PartitionFetchState fetch;
  fetch.position = 70;
  EXPECT_EQ(CommittedPosition(partition, nullptr), -1);
  EXPECT_EQ(CommittedPosition(partition, &fetch), 70);
  partition.start_offset = 40;
  EXPECT_EQ(CommittedPosition(partition, &fetch), 40);
  partition.last_committed = 55;
  EXPECT_EQ(CommittedPosition(partition, &fetch), 55);
}

TEST(MetricsTest, StateCollectorReportsPartitionsLanesBuffersAndStreams) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  FixedClock clock(now);
  EngineSnapshot snapshot;
  snapshot.buffered_events = 12;
  snapshot.buffered_bytes = 3456;
  snapshot.in_flight = 5;
  snapshot.queued_events = 7;
  snapshot.longest_lane = 4;
  snapshot.delayed_events = 2;
  snapshot.delay_stage_events = 1;
  snapshot.blocked_events = 1;
  snapshot.processors = {ProcessorSnapshot{3, 120, 5}};
  PartitionSnapshot busy;
  busy.partition = {"orders", 0};
  busy.last_committed = 100;
  busy.lowest_unfinished = 100;
  busy.oldest_unfinished_since = now - absl::Seconds(42);
  busy.buffered = 12;
  busy.in_flight = 5;
  busy.blocked = true;
  PartitionSnapshot idle;
  idle.partition = {"orders", 1};
  snapshot.partitions = {busy, idle};
  std::map<TopicPartition, PartitionFetchState> fetch;
  fetch[{"orders", 0}] = PartitionFetchState{150, 160, true};
  fetch[{"orders", 1}] = PartitionFetchState{30, 30, false};

  StateCollector collector(
      TestConfig(), [&snapshot] { return snapshot; }, [&fetch] { return fetch; }, &clock);
  Exposition metrics = Serialize(collector);
  const MetricLabels p0 = {{"topic", "orders"}, {"partition", "0"}};
  const MetricLabels p1 = {{"topic", "orders"}, {"partition", "1"}};
  EXPECT_EQ(metrics.Value("ferry_partition_lag", p0), 50);
  EXPECT_EQ(metrics.Value("ferry_partition_end_offset", p0), 150);
  EXPECT_EQ(metrics.Value("ferry_partition_committed_offset", p0), 100);
  EXPECT_EQ(metrics.Value("ferry_partition_oldest_unfinished_age_seconds", p0), 42);
  EXPECT_EQ(metrics.Value("ferry_partition_oldest_unfinished_offset", p0), 100);
  EXPECT_EQ(metrics.Value("ferry_partition_buffered_events", p0), 12);
  EXPECT_EQ(metrics.Value("ferry_partition_in_flight_events", p0), 5);
  EXPECT_EQ(metrics.Value("ferry_partition_paused", p0), 1);
  EXPECT_EQ(metrics.Value("ferry_partition_blocked", p0), 1);
  // Nothing consumed yet: the committed position is the fetch position.
  EXPECT_EQ(metrics.Value("ferry_partition_lag", p1), 0);
  EXPECT_EQ(metrics.Value("ferry_partition_committed_offset", p1), 30);
  EXPECT_EQ(metrics.Value("ferry_partition_oldest_unfinished_age_seconds", p1), 0);
  EXPECT_FALSE(metrics.Value("ferry_partition_oldest_unfinished_offset", p1).has_value());
  EXPECT_EQ(metrics.Value("ferry_partition_paused", p1), 0);

  EXPECT_EQ(metrics.Value("ferry_assigned_partitions"), 2);
  EXPECT_EQ(metrics.Value("ferry_buffered_events"), 12);
  EXPECT_EQ(metrics.Value("ferry_buffered_events_budget"), 1000);
  EXPECT_EQ(metrics.Value("ferry_buffered_bytes"), 3456);
  EXPECT_EQ(metrics.Value("ferry_buffered_bytes_budget"), 1 << 20);
  EXPECT_EQ(metrics.Value("ferry_queued_events"), 7);
  EXPECT_EQ(metrics.Value("ferry_longest_lane_queued_events"), 4);
  EXPECT_EQ(metrics.Value("ferry_lane_capacity_events"), 50);
  EXPECT_EQ(metrics.Value("ferry_lanes"), 16);
  EXPECT_EQ(metrics.Value("ferry_delayed_events"), 2);
  EXPECT_EQ(metrics.Value("ferry_delay_stage_events"), 1);
  EXPECT_EQ(metrics.Value("ferry_delay_stage_capacity_events"), TestConfig().max_delayed_events);
  EXPECT_EQ(metrics.Value("ferry_blocked_events"), 1);
  EXPECT_EQ(metrics.Value("ferry_in_flight_events"), 5);
  EXPECT_EQ(metrics.Value("ferry_worker_streams", {{"processor", "billing"}}), 3);
  EXPECT_EQ(metrics.Value("ferry_worker_streams_configured", {{"processor", "billing"}}), 4);
  EXPECT_EQ(metrics.Value("ferry_worker_credit", {{"processor", "billing"}}), 120);
  EXPECT_EQ(metrics.Value("ferry_worker_in_flight_events", {{"processor", "billing"}}), 5);

  // A revoked partition's series go with it.
  snapshot.partitions = {idle};
  fetch.erase({"orders", 0});
  metrics = Serialize(collector);
  EXPECT_TRUE(metrics.Find("ferry_partition_lag", p0).empty());
  EXPECT_EQ(metrics.Find("ferry_partition_lag").size(), 1u);
}

// Rate and in-flight limits for every processor; breaker series only where
// the breaker is enabled, its state encoded 0/1/2 and its openings a counter.
TEST(MetricsTest, StateCollectorReportsLimitsAndCircuitBreakers) {
  FixedClock clock(absl::FromUnixSeconds(1'800'000'000));
  Config config = TestConfig();
  for (const char* name : {"search", "mailer", "audit"}) {
    ProcessorConfig processor = config.processors[0];
    processor.name = name;
    config.processors.push_back(processor);
  }
  EngineSnapshot snapshot;
  ProcessorSnapshot billing;  // limited, breaker open
  billing.rate_limit_eps = 250.5;
  billing.rate_limit_burst = 250;
  billing.concurrency_limit = 17;
  billing.concurrency_adaptive = true;
  billing.breaker_enabled = true;
  billing.breaker_state = BreakerState::kOpen;
  billing.breaker_opened = 3;
  ProcessorSnapshot search;  // no limit, breaker half-open
  search.concurrency_limit = 400;
  search.breaker_enabled = true;
  search.breaker_state = BreakerState::kHalfOpen;
  search.breaker_opened = 1;
  ProcessorSnapshot mailer;  // breaker off; garbage that must not leak out
  mailer.rate_limit_eps = std::numeric_limits<double>::quiet_NaN();
  mailer.concurrency_limit = 8;
  mailer.breaker_state = BreakerState::kOpen;
  mailer.breaker_opened = 9;
  // "audit" has no snapshot entry: reported as unlimited, no breaker.
  snapshot.processors = {billing, search, mailer};
  StateCollector collector(
      config, [&snapshot] { return snapshot; },
      [] { return std::map<TopicPartition, PartitionFetchState>{}; }, &clock);

  Exposition metrics = Serialize(collector);
  const MetricLabels b = {{"processor", "billing"}};
  const MetricLabels s = {{"processor", "search"}};
  const MetricLabels m = {{"processor", "mailer"}};
  const MetricLabels a = {{"processor", "audit"}};
  EXPECT_EQ(metrics.families.at("ferry_processor_rate_limit_events_per_second").type, "gauge");
  EXPECT_EQ(metrics.families.at("ferry_processor_concurrency_limit").type, "gauge");
  EXPECT_EQ(metrics.families.at("ferry_circuit_breaker_state").type, "gauge");
  EXPECT_EQ(metrics.families.at("ferry_circuit_breaker_opened_total").type, "counter");
  EXPECT_EQ(metrics.Value("ferry_processor_rate_limit_events_per_second", b), 250.5);
  EXPECT_EQ(metrics.Value("ferry_processor_rate_limit_events_per_second", s), 0);
  EXPECT_EQ(metrics.Value("ferry_processor_rate_limit_events_per_second", m), 0);
  EXPECT_EQ(metrics.Value("ferry_processor_rate_limit_events_per_second", a), 0);
  EXPECT_EQ(metrics.Value("ferry_processor_concurrency_limit", b), 17);
  EXPECT_EQ(metrics.Value("ferry_processor_concurrency_limit", s), 400);
  EXPECT_EQ(metrics.Value("ferry_processor_concurrency_limit", m), 8);
  EXPECT_EQ(metrics.Value("ferry_processor_concurrency_limit", a), 0);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_state", b), 1);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_state", s), 2);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_opened_total", b), 3);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_opened_total", s), 1);
  EXPECT_EQ(metrics.Find("ferry_circuit_breaker_state").size(), 2u);
  EXPECT_EQ(metrics.Find("ferry_circuit_breaker_opened_total").size(), 2u);
  EXPECT_TRUE(metrics.Find("ferry_circuit_breaker_state", m).empty());
  EXPECT_TRUE(metrics.Find("ferry_circuit_breaker_state", a).empty());

  // Closing reads 0; a negative count (an engine bug) never makes the
  // counter go below zero.
  snapshot.processors[0].breaker_state = BreakerState::kClosed;
  snapshot.processors[0].breaker_opened = -5;
  metrics = Serialize(collector);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_state", b), 0);
  EXPECT_EQ(metrics.Value("ferry_circuit_breaker_opened_total", b), 0);

  // No breaker anywhere: the families stay declared (rules naming them
  // load) and carry no series.
  snapshot.processors = {};
  metrics = Serialize(collector);
  EXPECT_TRUE(metrics.HasFamily("ferry_circuit_breaker_state"));
  EXPECT_TRUE(metrics.HasFamily("ferry_circuit_breaker_opened_total"));
  EXPECT_TRUE(metrics.Find("ferry_circuit_breaker_state").empty());
  EXPECT_EQ(metrics.Find("ferry_processor_concurrency_limit").size(), 4u);
}

TEST(MetricsTest, ProcessCollectorReportsTheStandardProcessMetrics) {
  ProcessCollector collector;
  const Exposition metrics = Serialize(collector);
  EXPECT_EQ(metrics.families.at("process_cpu_seconds_total").type, "counter");
  EXPECT_GT(*metrics.Value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(*metrics.Value("process_virtual_memory_bytes"), 1 << 20);
  EXPECT_GE(*metrics.Value("process_cpu_seconds_total"), 0);
  EXPECT_GT(*metrics.Value("process_open_fds"), 2);
  EXPECT_GE(*metrics.Value("process_max_fds"), *metrics.Value("process_open_fds"));
  const double start = *metrics.Value("process_start_time_seconds");
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);
}

TEST(MetricsTest, ListeningPortsTheHttpServerUnderstands) {
  EXPECT_EQ(HttpListeningPort("0.0.0.0:9464").value_or(""), "0.0.0.0:9464");
  EXPECT_EQ(HttpListeningPort("127.0.0.1:0").value_or(""), "127.0.0.1:0");
  EXPECT_EQ(HttpListeningPort("localhost:9464").value_or(""), "localhost:9464");
  EXPECT_EQ(HttpListeningPort("[::]:9464").value_or(""), "+9464");
  EXPECT_EQ(HttpListeningPort("[::1]:9464").value_or(""), "127.0.0.1:9464");
  EXPECT_FALSE(HttpListeningPort("[fd00::2]:9464").ok());
  EXPECT_FALSE(HttpListeningPort("9464").ok());
  // Both forms bind.
  for (const char* address : {"[::]:0", "[::1]:0", "localhost:0"}) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(address);
    ASSERT_TRUE(server.ok()) << address << ": " << server.status();
    EXPECT_GT((*server)->port(), 0) << address;
  }
}

TEST(MetricsTest, ServesEveryCollectableOverHttpOnAFreePort) {
  auto registry = std::make_shared<prometheus::Registry>();
  const Config config = TestConfig();
  EngineStats engine_stats(*registry, config);
  ConsumerStats consumer_stats(*registry);
  consumer_stats.Commit(true);
  auto process = std::make_shared<ProcessCollector>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  (*server)->Register(registry);
  (*server)->Register(process);

  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  absl::StatusOr<Exposition> scraped = ScrapeMetrics(address);
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->Value("ferry_commits_total"), 1);
  EXPECT_TRUE(scraped->Value("process_resident_memory_bytes").has_value());

  // The port is taken now: a second server reports it.
  absl::StatusOr<std::unique_ptr<MetricsServer>> second = MetricsServer::Start(address);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(address));

  absl::StatusOr<std::string> missing = HttpGet(address, "/nothing-here", absl::Seconds(5));
  EXPECT_FALSE(missing.ok());
}

// Prometheus naming practice for every family ferry exports: a ferry_
// prefix, snake_case, counters end in _total, histograms in _seconds, help
// text present, and no unbounded labels (offsets, keys, ids).
TEST(MetricsTest, EveryFerryMetricFollowsTheNamingRules) {
  auto registry = std::make_shared<prometheus::Registry>();
  const Config config = TestConfig();
  EngineStats engine_stats(*registry, config);
  ConsumerStats consumer_stats(*registry);
  WorkerPoolStats worker_stats(*registry, config);
  FixedClock clock(absl::Now());
  EngineSnapshot snapshot;
  PartitionSnapshot partition;
  partition.partition = {"orders", 3};
  partition.lowest_unfinished = 5;
  snapshot.partitions = {partition};
  StateCollector state(
      config, [&snapshot] { return snapshot; },
      [] { return std::map<TopicPartition, PartitionFetchState>{}; }, &clock);

  std::vector<prometheus::MetricFamily> families = registry->Collect();
  for (prometheus::MetricFamily& family : state.Collect()) families.push_back(std::move(family));
  absl::StatusOr<Exposition> parsed =
      ParseExposition(prometheus::TextSerializer().Serialize(families));
  ASSERT_TRUE(parsed.ok()) << parsed.status();

  const std::set<std::string> allowed_labels = {"topic", "partition", "processor", "type",
                                                "status", "policy",    "event",     "reason",
                                                "le"};
  int checked = 0;
  for (const auto& [name, family] : parsed->families) {
    ASSERT_TRUE(absl::StartsWith(name, "ferry_")) << name;
    for (char c : name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << name;
    }
    EXPECT_FALSE(family.help.empty()) << name;
    EXPECT_EQ(family.type == "counter", absl::EndsWith(name, "_total")) << name;
    if (family.type == "histogram") {
      EXPECT_TRUE(absl::EndsWith(name, "_seconds")) << name;
    }
    for (const MetricSample& sample : family.samples) {
      for (const auto& [label, value] : sample.labels) {
        EXPECT_EQ(allowed_labels.count(label), 1u) << name << " has label " << label;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace ferry
