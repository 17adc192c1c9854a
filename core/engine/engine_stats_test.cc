// EngineStats through the Engine: what each event does to the counters and
// histograms, the bounded labels, and the snapshot fields the state gauges
// are computed from (oldest unfinished event, lanes, delay stage, streams).
#include "core/engine/engine_stats.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/lanes.h"
#include "tests/tools/metrics_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// Two processors routed by type: "slow" takes type "a", "rest" takes "*".
Config TwoProcessorConfig() {
  Config config;
  TopicConfig topic;
  topic.name = "t";
  topic.type = FieldSource{FieldSource::Kind::kHeader, "type"};
  config.topics.push_back(topic);
  ProcessorConfig slow;
  slow.name = "slow";
  slow.target = "ipv4:127.0.0.1:1";
  slow.event_types = {"a"};
  slow.timeout = absl::Seconds(10);
  slow.max_attempts = 2;
  slow.retry_backoff = absl::Milliseconds(100);
  slow.retry_backoff_max = absl::Milliseconds(100);
  ProcessorConfig rest = slow;
  rest.name = "rest";
  rest.event_types = {"*"};
  config.processors = {slow, rest};
  config.lane_count = 8;
  config.lane_capacity = 100;
  return config;
}

// `n` keys that land in different lanes (KEY ordering, 8 lanes), so none
// waits behind another.
std::vector<std::string> DistinctLaneKeys(int n) {
  std::vector<std::string> keys;
  std::vector<bool> used(8, false);
  for (int i = 0; static_cast<int>(keys.size()) < n; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const int lane = Lanes<int>::LaneFor(Ordering::kKey, "t", 0, key, 8);
    if (used[static_cast<size_t>(lane)]) continue;
    used[static_cast<size_t>(lane)] = true;
    keys.push_back(key);
  }
  return keys;
}

class EngineStatsTest : public ::testing::Test, public EngineHarness {
 protected:
  explicit EngineStatsTest(Config config = TwoProcessorConfig())
      : config_(config),
        registry_(std::make_shared<prometheus::Registry>()),
        stats_(*registry_, config_) {
    Start(config_, TwoPartitions(), DeadLetters::kFakeWriter, &stats_);
  }
  // The engine counts into stats_, which dies before the harness base.
  ~EngineStatsTest() override { engine_.reset(); }

  // The registry as /metrics would serve it, parsed strictly.
  Exposition Scrape() {
    const std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
    absl::StatusOr<Exposition> parsed = ParseExposition(text);
    EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
    return parsed.ok() ? *parsed : Exposition();
  }

  Config config_;
  std::shared_ptr<prometheus::Registry> registry_;
  EngineStats stats_;
};

TEST_F(EngineStatsTest, TypeLabelsAreBoundedByTheConfig) {
  EXPECT_EQ(stats_.TypeLabel(stats_.TypeIndex("a")), "a");
  EXPECT_EQ(stats_.TypeLabel(stats_.TypeIndex("anything-else")), "other");
  EXPECT_EQ(stats_.TypeLabel(stats_.TypeIndex("")), "other");
  EXPECT_THAT(stats_.type_labels(), ElementsAre("other", "a"));

  // Only reachable (processor, type) series exist, at zero, from the start.
  const Exposition metrics = Scrape();
  std::vector<std::string> pairs;
  for (const MetricSample* sample : metrics.Find("ferry_attempts_total")) {
    pairs.push_back(sample->labels.at("processor") + "/" + sample->labels.at("type"));
    EXPECT_EQ(sample->value, 0);
  }
  EXPECT_THAT(pairs, UnorderedElementsAre("slow/a", "rest/other", "none/other"));
  // ok, retry, fail, timeout, not_attempted
  EXPECT_EQ(metrics.Find("ferry_results_total", {{"processor", "slow"}}).size(), 5u);
  EXPECT_EQ(metrics.Value("ferry_records_consumed_total", {{"topic", "t"}}), 0);
}

TEST_F(EngineStatsTest, TopicAndConstantTypesAreLabels) {
  Config config = TwoProcessorConfig();
  config.topics[0].type = FieldSource{FieldSource::Kind::kTopic, ""};
  TopicConfig clicks;
  clicks.name = "clicks";
  clicks.type = FieldSource{FieldSource::Kind::kConstant, "click"};
  config.topics.push_back(clicks);
  prometheus::Registry registry;
  EngineStats stats(registry, config);
  EXPECT_THAT(stats.type_labels(), ElementsAre("other", "a", "t", "click"));
}

TEST_F(EngineStatsTest, CountsConsumedDispatchedAndResultsWithTimings) {
  FakeWorkerStream slow("slow#0");
  FakeWorkerStream rest("rest#0");
  const int64_t slow_id = Connect(*engine_, slow, 10, 0);
  const int64_t rest_id = Connect(*engine_, rest, 10, 1);

  const std::vector<std::string> keys = DistinctLaneKeys(3);
  engine_->Submit(MakeEvent(0, 0, keys[0], "a"), 100);
  engine_->Submit(MakeEvent(0, 1, keys[1], "b"), 50);
  engine_->Submit(MakeEvent(1, 0, keys[2], "zzz"), 25);
  ASSERT_EQ(slow.held().size(), 1u);
  ASSERT_EQ(rest.held().size(), 2u);

  // The slow processor answers after 2s, the other after 10ms.
  clock_.Advance(absl::Milliseconds(10));
  AckAll(*engine_, rest_id, rest);
  clock_.Advance(absl::Milliseconds(1990));
  engine_->OnResults(slow_id, ResultFor(slow.TakeHeld()[0].id(), v1::Result::OK));

  const Exposition metrics = Scrape();
  EXPECT_EQ(metrics.Value("ferry_records_consumed_total", {{"topic", "t"}}), 3);
  EXPECT_EQ(metrics.Value("ferry_consumed_bytes_total", {{"topic", "t"}}), 175);
  EXPECT_EQ(metrics.Sum("ferry_attempts_total"), 3);
  EXPECT_EQ(metrics.Value("ferry_attempts_total", {{"processor", "rest"}, {"type", "other"}}), 2);
  EXPECT_EQ(metrics.Sum("ferry_results_total", {{"status", "ok"}}), 3);
  EXPECT_EQ(metrics.Value("ferry_results_total",
                          {{"processor", "slow"}, {"type", "a"}, {"status", "ok"}}),
            1);

  const MetricLabels slow_a = {{"processor", "slow"}, {"type", "a"}};
  const MetricLabels rest_other = {{"processor", "rest"}, {"type", "other"}};
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_count", slow_a), 1);
  EXPECT_DOUBLE_EQ(*metrics.Value("ferry_processing_duration_seconds_sum", slow_a), 2.0);
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_count", rest_other), 2);
  EXPECT_NEAR(*metrics.Value("ferry_processing_duration_seconds_sum", rest_other), 0.02, 1e-9);
  // Dispatched the moment they were consumed (streams were ready).
  EXPECT_EQ(metrics.Sum("ferry_enqueue_duration_seconds_sum"), 0);
  EXPECT_EQ(metrics.Sum("ferry_enqueue_duration_seconds_count"), 3);
  // The slow one is in the 2.5s bucket, not under 1s.
  MetricLabels bucket = slow_a;
  bucket["le"] = "1";
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_bucket", bucket), 0);
  bucket["le"] = "2.5";
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_bucket", bucket), 1);
}

// A consume batch looks its routing up once per run of one (topic, type) and
// counts consumed records once per run of one topic: events of other topics
// and types in between still go to their own processor and count under
// their own topic.
class EngineStatsTwoTopicsTest : public EngineStatsTest {
 protected:
  static Config TwoTopics() {
    Config config = TwoProcessorConfig();
    config.topics.push_back(config.topics[0]);
    config.topics[1].name = "u";
    return config;
  }
  EngineStatsTwoTopicsTest() : EngineStatsTest(TwoTopics()) {
    Start(config_, {{"t", 0}, {"u", 0}}, DeadLetters::kFakeWriter, &stats_);
  }
};

TEST_F(EngineStatsTwoTopicsTest, ABatchOfMixedTopicsAndTypesRoutesAndCountsEachEvent) {
  FakeWorkerStream slow("slow#0");
  FakeWorkerStream rest("rest#0");
  Connect(*engine_, slow, 100, 0);
  Connect(*engine_, rest, 100, 1);
  const std::vector<std::string> keys = DistinctLaneKeys(6);
  const struct {
    const char* topic;
    const char* type;
    int64_t bytes;
  } records[] = {{"t", "a", 1}, {"t", "a", 2}, {"u", "a", 4},
                 {"t", "b", 8}, {"u", "b", 16}, {"t", "a", 32}};
  std::vector<Engine::SubmitItem> items;
  std::map<std::string, int64_t> next_offset;
  for (size_t i = 0; i < 6; ++i) {
    const TopicPartition tp{records[i].topic, 0};
    items.push_back(
        SubmitItemOf(MakeEvent(tp, next_offset[tp.topic]++, keys[i], records[i].type),
                     records[i].bytes));
  }
  engine_->SubmitBatch(items);

  std::vector<std::string> to_slow;
  for (const v1::Event& event : slow.held()) {
    to_slow.push_back(absl::StrCat(event.topic(), "/", event.offset()));
  }
  std::vector<std::string> to_rest;
  for (const v1::Event& event : rest.held()) {
    to_rest.push_back(absl::StrCat(event.topic(), "/", event.offset()));
  }
  EXPECT_THAT(to_slow, UnorderedElementsAre("t/0", "t/1", "u/0", "t/3"));
  EXPECT_THAT(to_rest, UnorderedElementsAre("t/2", "u/1"));
  const Exposition metrics = Scrape();
  EXPECT_EQ(metrics.Value("ferry_records_consumed_total", {{"topic", "t"}}), 4);
  EXPECT_EQ(metrics.Value("ferry_consumed_bytes_total", {{"topic", "t"}}), 1 + 2 + 8 + 32);
  EXPECT_EQ(metrics.Value("ferry_records_consumed_total", {{"topic", "u"}}), 2);
  EXPECT_EQ(metrics.Value("ferry_consumed_bytes_total", {{"topic", "u"}}), 4 + 16);
  EXPECT_EQ(metrics.Value("ferry_attempts_total", {{"processor", "slow"}, {"type", "a"}}), 4);
  EXPECT_EQ(metrics.Value("ferry_attempts_total", {{"processor", "rest"}, {"type", "other"}}),
            2);
}

// Deferred observations, once flushed, are exactly what the same calls made
// one by one record: every bucket, sum, count and counter; none before the
// flush, and nothing twice after a second one.
TEST(EngineStatsDeferTest, AFlushRecordsExactlyWhatImmediateCallsWould) {
  const Config config = TwoProcessorConfig();
  prometheus::Registry immediate_registry;
  EngineStats immediate(immediate_registry, config);
  prometheus::Registry deferred_registry;
  EngineStats deferred(deferred_registry, config);
  auto text = [](prometheus::Registry& registry) {
    return prometheus::TextSerializer().Serialize(registry.Collect());
  };
  const std::string at_start = text(deferred_registry);
  const int a = immediate.TypeIndex("a");
  // Values on bucket bounds, between them, past the last and at zero; one
  // series with a single observation (observed as is) and ones with many.
  const std::vector<absl::Duration> waits = {
      absl::ZeroDuration(), absl::Microseconds(500), absl::Microseconds(501),
      absl::Milliseconds(7), absl::Seconds(1),      absl::Seconds(400)};
  for (size_t i = 0; i < waits.size(); ++i) {
    const bool redelivery = i % 3 == 2;
    const ResultStatus status = static_cast<ResultStatus>(i % 5);
    immediate.Dispatched(0, a, waits[i], redelivery);
    deferred.DeferDispatched(0, a, waits[i], redelivery);
    immediate.Result(0, a, status, waits[i] * 2);
    deferred.DeferResult(0, a, status, waits[i] * 2);
  }
  immediate.Dispatched(1, 0, absl::Milliseconds(3), false);
  deferred.DeferDispatched(1, 0, absl::Milliseconds(3), false);
  immediate.Result(-1, 0, ResultStatus::kFail, absl::Milliseconds(9));
  deferred.DeferResult(-1, 0, ResultStatus::kFail, absl::Milliseconds(9));

  EXPECT_EQ(text(deferred_registry), at_start);
  deferred.Flush();
  EXPECT_EQ(text(deferred_registry), text(immediate_registry));
  deferred.Flush();
  EXPECT_EQ(text(deferred_registry), text(immediate_registry));
  // And again after a flush: the held buckets start from zero.
  immediate.Result(0, a, ResultStatus::kOk, absl::Milliseconds(2));
  deferred.DeferResult(0, a, ResultStatus::kOk, absl::Milliseconds(2));
  immediate.Result(0, a, ResultStatus::kOk, absl::Seconds(20));
  deferred.DeferResult(0, a, ResultStatus::kOk, absl::Seconds(20));
  deferred.Flush();
  EXPECT_EQ(text(deferred_registry), text(immediate_registry));
}

TEST_F(EngineStatsTest, EnqueueTimeCountsWaitingForAStream) {
  engine_->Submit(MakeEvent(0, 0, "k", "a"), 10);
  clock_.Advance(absl::Seconds(3));
  FakeWorkerStream slow("slow#0");
  Connect(*engine_, slow, 10, 0);
  ASSERT_EQ(slow.held().size(), 1u);
  const Exposition metrics = Scrape();
  EXPECT_DOUBLE_EQ(*metrics.Value("ferry_enqueue_duration_seconds_sum",
                                  {{"processor", "slow"}, {"type", "a"}}),
                   3.0);
}

TEST_F(EngineStatsTest, RetriesTimeoutsRedeliveriesStaleAndFailures) {
  FakeWorkerStream slow("slow#0");
  const int64_t slow_id = Connect(*engine_, slow, 10, 0);
  engine_->Submit(MakeEvent(0, 0, "k", "a"), 10);
  uint64_t first = slow.TakeHeld()[0].id();
  engine_->OnResults(slow_id, ResultFor(first, v1::Result::RETRY));
  engine_->OnResults(slow_id, ResultFor(first, v1::Result::OK));  // stale: already answered
  clock_.Advance(absl::Milliseconds(200));
  engine_->OnTimer();  // backoff over: attempt 2
  ASSERT_EQ(slow.held().size(), 1u);
  EXPECT_EQ(slow.held()[0].attempt(), 2);
  // Attempt 2 times out: terminal (max_attempts 2), skipped by policy.
  clock_.Advance(absl::Seconds(11));
  engine_->OnTimer();

  // A lost stream: its in-flight event is redelivered, not a new attempt.
  engine_->Submit(MakeEvent(1, 0, "j", "a"), 10);
  ASSERT_EQ(slow.TakeHeld().size(), 2u);  // the timed-out one was also sent before
  engine_->OnStreamClosed(slow_id);
  FakeWorkerStream again("slow#1");
  Connect(*engine_, again, 10, 0);
  ASSERT_EQ(again.held().size(), 1u);

  const Exposition metrics = Scrape();
  const MetricLabels slow_a = {{"processor", "slow"}, {"type", "a"}};
  auto result = [&](const char* status) {
    MetricLabels labels = slow_a;
    labels["status"] = status;
    return metrics.Value("ferry_results_total", labels).value_or(-1);
  };
  EXPECT_EQ(result("retry"), 1);
  EXPECT_EQ(result("timeout"), 1);
  EXPECT_EQ(result("ok"), 0);
  EXPECT_EQ(result("fail"), 0);
  EXPECT_EQ(metrics.Value("ferry_attempts_total", slow_a), 3);  // 2 + 1, not the redelivery
  EXPECT_EQ(metrics.Value("ferry_redeliveries_total", slow_a), 1);
  EXPECT_EQ(metrics.Value("ferry_stale_results_total", {{"processor", "slow"}}), 1);
  MetricLabels skip = slow_a;
  skip["policy"] = "skip";
  EXPECT_EQ(metrics.Value("ferry_terminal_failures_total", skip), 1);
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_count", slow_a), 2);
}

TEST_F(EngineStatsTest, RunsAndNotAttemptedResults) {
  for (int64_t offset = 0; offset < 3; ++offset) {
    engine_->Submit(MakeEvent(0, offset, "k", "a"), 10);
  }
  FakeWorkerStream slow("slow#0");
  const int64_t slow_id = Connect(*engine_, slow, 10, 0, /*max_run=*/4);
  std::vector<v1::Event> run = slow.TakeHeld();
  ASSERT_EQ(run.size(), 3u);
  engine_->OnResults(slow_id, ResultsFor({{run[0].id(), v1::Result::OK},
                                          {run[1].id(), v1::Result::RETRY},
                                          {run[2].id(), v1::Result::NOT_ATTEMPTED}}));
  clock_.Advance(absl::Milliseconds(200));
  engine_->OnTimer();  // the retry and the member given back, as a run of 2
  ASSERT_EQ(slow.held().size(), 2u);

  const Exposition metrics = Scrape();
  const MetricLabels slow_a = {{"processor", "slow"}, {"type", "a"}};
  MetricLabels not_attempted = slow_a;
  not_attempted["status"] = "not_attempted";
  EXPECT_EQ(metrics.Value("ferry_results_total", not_attempted), 1);
  EXPECT_EQ(metrics.Value("ferry_runs_total", {{"processor", "slow"}}), 2);
  EXPECT_EQ(metrics.Value("ferry_run_events_total", {{"processor", "slow"}}), 5);
  // 3 first attempts and the retry; the member given back is not an attempt.
  EXPECT_EQ(metrics.Value("ferry_attempts_total", slow_a), 4);
  // Handled: the OK and the RETRY; the member given back was not processing.
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_count", slow_a), 2);
}

TEST_F(EngineStatsTest, DuplicatesPoisonAndRevokedDrops) {
  engine_->Submit(MakeEvent(0, 5, "k", "a"), 10);
  engine_->Submit(MakeEvent(0, 5, "k", "a"), 10);  // duplicate
  RawRecord poison;
  poison.topic = "t";
  poison.partition = 1;
  poison.offset = 0;
  engine_->SubmitPoison(poison, "undecodable");
  engine_->OnRevoked({{"t", 0}});  // drops the queued event
  engine_->Submit(MakeEvent(0, 6, "k", "a"), 10);  // not assigned any more

  const Exposition metrics = Scrape();
  EXPECT_EQ(metrics.Value("ferry_duplicate_records_total"), 1);
  EXPECT_EQ(metrics.Value("ferry_poison_records_total", {{"topic", "t"}}), 1);
  EXPECT_EQ(metrics.Value("ferry_revoked_events_dropped_total"), 2);
  EXPECT_EQ(metrics.Value("ferry_terminal_failures_total",
                          {{"processor", "none"}, {"type", "other"}, {"policy", "skip"}}),
            1);
}

TEST_F(EngineStatsTest, SnapshotTracksTheOldestUnfinishedEvent) {
  FakeWorkerStream slow("slow#0");
  const int64_t slow_id = Connect(*engine_, slow, 10, 0);
  const std::vector<std::string> keys = DistinctLaneKeys(3);
  const absl::Time start = clock_.Now();
  engine_->Submit(MakeEvent(0, 10, keys[0], "a"), 10);
  clock_.Advance(absl::Seconds(1));
  engine_->Submit(MakeEvent(0, 11, keys[1], "a"), 10);
  clock_.Advance(absl::Seconds(1));
  engine_->Submit(MakeEvent(0, 12, keys[2], "a"), 10);
  std::vector<v1::Event> sent = slow.TakeHeld();
  ASSERT_EQ(sent.size(), 3u);

  auto partition0 = [this] {
    for (const PartitionSnapshot& partition : engine_->Snapshot().partitions) {
      if (partition.partition.partition == 0) return partition;
    }
    return PartitionSnapshot{};
  };
  PartitionSnapshot p = partition0();
  EXPECT_EQ(p.lowest_unfinished, 10);
  EXPECT_EQ(p.oldest_unfinished_since, start);
  EXPECT_EQ(p.start_offset, 10);
  EXPECT_EQ(p.buffered, 3);
  EXPECT_EQ(p.in_flight, 3);
  EXPECT_FALSE(p.last_committed.has_value());

  // 11 finishes first: 10 still blocks.
  engine_->OnResults(slow_id, ResultFor(sent[1].id(), v1::Result::OK));
  p = partition0();
  EXPECT_EQ(p.lowest_unfinished, 10);
  EXPECT_EQ(p.oldest_unfinished_since, start);
  // 10 finishes: 12 (consumed at start + 2s) is the blocker now.
  engine_->OnResults(slow_id, ResultFor(sent[0].id(), v1::Result::OK));
  p = partition0();
  EXPECT_EQ(p.lowest_unfinished, 12);
  EXPECT_EQ(p.oldest_unfinished_since, start + absl::Seconds(2));
  EXPECT_EQ(p.commit_offset, 12);
  EXPECT_EQ(p.in_flight, 1);
  engine_->MarkCommitted(engine_->PendingCommits());
  EXPECT_EQ(partition0().last_committed, 12);
  engine_->OnResults(slow_id, ResultFor(sent[2].id(), v1::Result::OK));
  p = partition0();
  EXPECT_FALSE(p.lowest_unfinished.has_value());
  EXPECT_FALSE(p.oldest_unfinished_since.has_value());
  EXPECT_EQ(p.buffered, 0);
}

TEST_F(EngineStatsTest, SnapshotLanesDelayStageAndStreams) {
  // No stream for "slow": its events queue; one key fills one lane.
  const std::vector<std::string> keys = DistinctLaneKeys(2);
  for (int i = 0; i < 5; ++i) engine_->Submit(MakeEvent(0, i, keys[0], "a"), 10);
  engine_->Submit(MakeEvent(0, 5, keys[1], "a"), 10);
  EngineSnapshot snapshot = engine_->Snapshot();
  EXPECT_EQ(snapshot.queued_events, 6);
  EXPECT_EQ(snapshot.longest_lane, 5);
  ASSERT_EQ(snapshot.processors.size(), 2u);
  EXPECT_EQ(snapshot.processors[0].connected_streams, 0);

  FakeWorkerStream slow("slow#0");
  const int64_t slow_id = Connect(*engine_, slow, 3, 0);
  snapshot = engine_->Snapshot();
  EXPECT_EQ(snapshot.processors[0].connected_streams, 1);
  EXPECT_EQ(snapshot.processors[0].in_flight, 2);  // one per lane (KEY ordering)
  EXPECT_EQ(snapshot.processors[0].credit, 1);
  EXPECT_EQ(snapshot.queued_events, 4);

  // A RETRY waits out its backoff in the delay stage.
  engine_->OnResults(slow_id, ResultFor(slow.TakeHeld()[0].id(), v1::Result::RETRY));
  snapshot = engine_->Snapshot();
  EXPECT_EQ(snapshot.delayed_events, 1);
}

}  // namespace
}  // namespace ferry::testing
