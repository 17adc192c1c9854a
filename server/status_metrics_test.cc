// StatusMetrics against the real stats objects and one registry, as ferry
// wires them: GetStatus's counters are exactly what the stats counted (the
// series /metrics serves), the buffers and workers come from the snapshot,
// and the budgets from the config.
#include "server/status_metrics.h"

#include <prometheus/registry.h>

#include <memory>

#include "core/engine/engine_stats.h"
#include "core/kafka/consumer_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/workers/worker_pool_stats.h"

namespace ferry {
namespace {

Config TwoProcessors() {
  absl::StatusOr<Config> config = ParseConfig(R"(topics:
  - name: orders
processors:
  - name: slow
    target: ipv4:127.0.0.1:1
    event_types: [a]
    streams: 4
  - name: fast
    target: ipv4:127.0.0.1:2
    streams: 2
lanes:
  capacity: 64
budgets:
  max_buffered_events: 1000
  max_buffered_bytes: 1MiB
)",
                                              "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : Config();
}

class StatusMetricsTest : public ::testing::Test {
 protected:
  const Config config_ = TwoProcessors();
  prometheus::Registry registry_;
  EngineStats engine_stats_{registry_, config_};
  ConsumerStats consumer_stats_{registry_};
  WorkerPoolStats worker_stats_{registry_, config_};
  const absl::Time started_ = absl::FromUnixMillis(1700000000000);
};

const v1::ProcessingStatus* Series(const v1::GetStatusResponse& response,
                                   const std::string& processor, const std::string& type) {
  for (const v1::ProcessingStatus& series : response.processing()) {
    if (series.processor() == processor && series.type() == type) return &series;
  }
  return nullptr;
}

TEST_F(StatusMetricsTest, CountersAreWhatTheStatsCounted) {
  const int a = engine_stats_.TypeIndex("a");
  const int orders = engine_stats_.TypeIndex("orders");
  for (int i = 0; i < 3; ++i) engine_stats_.RecordConsumed("orders", 100);
  engine_stats_.Dispatched(0, a, absl::Milliseconds(10), /*redelivery=*/false);
  engine_stats_.Dispatched(0, a, absl::Milliseconds(30), /*redelivery=*/false);
  engine_stats_.Dispatched(0, a, absl::Milliseconds(50), /*redelivery=*/true);
  engine_stats_.Result(0, a, ResultStatus::kOk, absl::Milliseconds(200));
  engine_stats_.Result(0, a, ResultStatus::kFail, absl::Milliseconds(400));
  engine_stats_.Dispatched(1, orders, absl::Milliseconds(1), false);
  engine_stats_.Result(1, orders, ResultStatus::kTimeout, absl::Seconds(2));
  engine_stats_.Result(1, orders, ResultStatus::kRetry, absl::Seconds(1));
  consumer_stats_.Commit(true);
  consumer_stats_.Commit(true);
  consumer_stats_.Commit(false);
  consumer_stats_.BackpressurePause();
  worker_stats_.Opened(0);
  worker_stats_.Opened(0);
  worker_stats_.Reset(0, StreamEnd::kError);
  worker_stats_.Reset(0, StreamEnd::kProtocolError);
  worker_stats_.Opened(1);

  const StatusMetrics metrics(config_, &registry_, started_);
  v1::GetStatusResponse response;
  metrics.Fill(EngineSnapshot{}, started_ + absl::Seconds(5), &response);

  EXPECT_EQ(response.started_at_ms(), 1700000000000);
  EXPECT_EQ(response.sampled_at_ms(), 1700000005000);
  const v1::StatusCounters& counters = response.counters();
  EXPECT_EQ(counters.records_consumed(), 3);
  EXPECT_EQ(counters.bytes_consumed(), 300);
  EXPECT_EQ(counters.results_ok(), 1);
  EXPECT_EQ(counters.results_fail(), 1);
  EXPECT_EQ(counters.results_retry(), 1);
  EXPECT_EQ(counters.results_timeout(), 1);
  EXPECT_EQ(counters.commits(), 2);
  EXPECT_EQ(counters.commit_errors(), 1);
  EXPECT_EQ(counters.fetch_pauses(), 1);

  const v1::ProcessingStatus* slow = Series(response, "slow", "a");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(slow->attempts(), 2);  // the redelivery is not an attempt
  EXPECT_EQ(slow->enqueue_count(), 3);
  EXPECT_NEAR(slow->enqueue_seconds(), 0.09, 1e-9);
  EXPECT_EQ(slow->processing_count(), 2);
  EXPECT_NEAR(slow->processing_seconds(), 0.6, 1e-9);
  EXPECT_EQ(slow->results_ok(), 1);
  EXPECT_EQ(slow->results_fail(), 1);
  const v1::ProcessingStatus* fast = Series(response, "fast", "orders");
  ASSERT_NE(fast, nullptr);
  EXPECT_EQ(fast->attempts(), 1);
  EXPECT_EQ(fast->results_timeout(), 1);
  EXPECT_EQ(fast->results_retry(), 1);
  EXPECT_NEAR(fast->processing_seconds(), 3.0, 1e-9);
  // Series that saw nothing are there at zero (the bounded label sets).
  const v1::ProcessingStatus* none = Series(response, "none", "other");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->attempts(), 0);

  ASSERT_EQ(response.processors_size(), 2);
  EXPECT_EQ(response.processors(0).name(), "slow");
  EXPECT_EQ(response.processors(0).streams_opened(), 2);
  EXPECT_EQ(response.processors(0).stream_resets(), 2);
  EXPECT_EQ(response.processors(1).name(), "fast");
  EXPECT_EQ(response.processors(1).streams_opened(), 1);
  EXPECT_EQ(response.processors(1).stream_resets(), 0);
}

TEST_F(StatusMetricsTest, BuffersAndWorkersFromTheSnapshotBudgetsFromTheConfig) {
  EngineSnapshot snapshot;
  snapshot.in_flight = 7;
  snapshot.queued_events = 11;
  snapshot.longest_lane = 5;
  snapshot.delayed_events = 3;
  snapshot.blocked_events = 2;
  snapshot.processors = {{/*connected_streams=*/3, /*credit=*/40, /*in_flight=*/7}, {}};
  const StatusMetrics metrics(config_, &registry_, started_);
  v1::GetStatusResponse response;
  metrics.Fill(snapshot, started_, &response);

  const v1::BufferStatus& buffers = response.buffers();
  EXPECT_EQ(buffers.max_buffered_events(), 1000);
  EXPECT_EQ(buffers.max_buffered_bytes(), 1 << 20);
  EXPECT_EQ(buffers.in_flight_events(), 7);
  EXPECT_EQ(buffers.queued_events(), 11);
  EXPECT_EQ(buffers.longest_lane_events(), 5);
  EXPECT_EQ(buffers.lane_capacity(), 64);
  EXPECT_EQ(buffers.delayed_events(), 3);
  EXPECT_EQ(buffers.blocked_events(), 2);
  ASSERT_EQ(response.processors_size(), 2);
  EXPECT_EQ(response.processors(0).streams(), 3);
  EXPECT_EQ(response.processors(0).streams_configured(), 4);
  EXPECT_EQ(response.processors(0).credit(), 40);
  EXPECT_EQ(response.processors(0).in_flight(), 7);
  EXPECT_EQ(response.processors(1).streams(), 0);
  EXPECT_EQ(response.processors(1).streams_configured(), 2);
}

TEST_F(StatusMetricsTest, ProtectionStateFromTheSnapshotBreakerOffUnlessEnabled) {
  EngineSnapshot snapshot;
  snapshot.processors.resize(2);
  ProcessorSnapshot& slow = snapshot.processors[0];
  slow.rate_limit_eps = 12.5;
  slow.rate_limit_burst = 3;
  slow.rate_limit_overridden = true;
  slow.concurrency_limit = 17;
  slow.concurrency_adaptive = true;
  slow.breaker_enabled = true;
  slow.breaker_state = BreakerState::kHalfOpen;
  slow.breaker_opened = 4;
  // Not enabled: "off", whatever state the snapshot carries.
  snapshot.processors[1].breaker_state = BreakerState::kOpen;
  snapshot.processors[1].concurrency_limit = 8;
  const StatusMetrics metrics(config_, nullptr, started_);
  v1::GetStatusResponse response;
  metrics.Fill(snapshot, started_, &response);
  ASSERT_EQ(response.processors_size(), 2);
  const v1::ProcessorStatus& a = response.processors(0);
  EXPECT_DOUBLE_EQ(a.rate_limit_events_per_second(), 12.5);
  EXPECT_EQ(a.rate_limit_burst(), 3);
  EXPECT_TRUE(a.rate_limit_overridden());
  EXPECT_EQ(a.concurrency_limit(), 17);
  EXPECT_TRUE(a.concurrency_adaptive());
  EXPECT_EQ(a.circuit_breaker(), "half_open");
  EXPECT_EQ(a.circuit_breaker_opened(), 4);
  const v1::ProcessorStatus& b = response.processors(1);
  EXPECT_EQ(b.rate_limit_events_per_second(), 0);
  EXPECT_FALSE(b.rate_limit_overridden());
  EXPECT_EQ(b.concurrency_limit(), 8);
  EXPECT_FALSE(b.concurrency_adaptive());
  EXPECT_EQ(b.circuit_breaker(), "off");
}

TEST_F(StatusMetricsTest, WithoutARegistryCountersStayZero) {
  engine_stats_.RecordConsumed("orders", 10);
  const StatusMetrics metrics(config_, nullptr, started_);
  v1::GetStatusResponse response;
  metrics.Fill(EngineSnapshot{}, started_, &response);
  EXPECT_EQ(response.counters().records_consumed(), 0);
  EXPECT_TRUE(response.processing().empty());
  EXPECT_EQ(response.processors_size(), 2);
}

}  // namespace
}  // namespace ferry
