#include "server/status_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// The metric names below are ferry's /metrics contract (dashboards and
// alerts use them too); tests/e2e/metrics_test checks GetStatus against a
// scrape, so a renamed series cannot silently read as 0 here.
constexpr absl::string_view kRecords = "ferry_records_consumed_total";
constexpr absl::string_view kBytes = "ferry_consumed_bytes_total";
constexpr absl::string_view kResults = "ferry_results_total";
constexpr absl::string_view kAttempts = "ferry_attempts_total";
constexpr absl::string_view kEnqueue = "ferry_enqueue_duration_seconds";
constexpr absl::string_view kProcessing = "ferry_processing_duration_seconds";
constexpr absl::string_view kCommits = "ferry_commits_total";
constexpr absl::string_view kCommitErrors = "ferry_commit_errors_total";
constexpr absl::string_view kFetchPauses = "ferry_fetch_pauses_total";
constexpr absl::string_view kStreamsOpened = "ferry_worker_streams_opened_total";
constexpr absl::string_view kStreamResets = "ferry_worker_stream_resets_total";

std::string Label(const ClientMetric& metric, absl::string_view name) {
  for (const ClientMetric::Label& label : metric.label) {
    if (label.name == name) return label.value;
  }
  return "";
}

int64_t Whole(double value) { return static_cast<int64_t>(std::llround(value)); }

// StatusCounters and ProcessingStatus both count results by status.
template <typename Message>
void AddResult(absl::string_view status, int64_t count, Message* message) {
  if (status == "ok") message->set_results_ok(message->results_ok() + count);
  if (status == "retry") message->set_results_retry(message->results_retry() + count);
  if (status == "fail") message->set_results_fail(message->results_fail() + count);
  if (status == "timeout") message->set_results_timeout(message->results_timeout() + count);
}

// What the registry holds, by the labels GetStatus groups it by.
struct Collected {
  v1::StatusCounters counters;
  std::map<std::pair<std::string, std::string>, v1::ProcessingStatus> processing;
  std::map<std::string, std::pair<int64_t, int64_t>> streams;  // processor -> opened, resets
};

void AddSeries(const MetricFamily& family, const ClientMetric& metric, Collected* out) {
  const absl::string_view name = family.name;
  const int64_t value = Whole(metric.counter.value);
  v1::StatusCounters& counters = out->counters;
  if (name == kRecords) counters.set_records_consumed(counters.records_consumed() + value);
  if (name == kBytes) counters.set_bytes_consumed(counters.bytes_consumed() + value);
  if (name == kCommits) counters.set_commits(counters.commits() + value);
  if (name == kCommitErrors) counters.set_commit_errors(counters.commit_errors() + value);
  if (name == kFetchPauses) counters.set_fetch_pauses(counters.fetch_pauses() + value);
  if (name == kStreamsOpened) out->streams[Label(metric, "processor")].first += value;
  if (name == kStreamResets) out->streams[Label(metric, "processor")].second += value;
  if (name != kResults && name != kAttempts && name != kEnqueue && name != kProcessing) return;

  const std::string processor = Label(metric, "processor");
  const std::string type = Label(metric, "type");
  v1::ProcessingStatus& series = out->processing[{processor, type}];
  series.set_processor(processor);
  series.set_type(type);
  if (name == kResults) {
    AddResult(Label(metric, "status"), value, &series);
    AddResult(Label(metric, "status"), value, &counters);
  } else if (name == kAttempts) {
    series.set_attempts(series.attempts() + value);
  } else if (name == kEnqueue) {
    series.set_enqueue_seconds(series.enqueue_seconds() + metric.histogram.sample_sum);
    series.set_enqueue_count(series.enqueue_count() +
                             static_cast<int64_t>(metric.histogram.sample_count));
  } else {
    series.set_processing_seconds(series.processing_seconds() + metric.histogram.sample_sum);
    series.set_processing_count(series.processing_count() +
                                static_cast<int64_t>(metric.histogram.sample_count));
  }
}

}  // namespace

StatusMetrics::StatusMetrics(const Config& config, const prometheus::Collectable* counters,
                             absl::Time started)
    : config_(config), counters_(counters), started_(started) {}

void StatusMetrics::Fill(const EngineSnapshot& snapshot, absl::Time now,
                         v1::GetStatusResponse* response) const {
  response->set_sampled_at_ms(absl::ToUnixMillis(now));
  response->set_started_at_ms(absl::ToUnixMillis(started_));
  v1::BufferStatus* buffers = response->mutable_buffers();
  buffers->set_max_buffered_events(config_.max_buffered_events);
  buffers->set_max_buffered_bytes(config_.max_buffered_bytes);
  buffers->set_in_flight_events(snapshot.in_flight);
  buffers->set_queued_events(snapshot.queued_events);
  buffers->set_longest_lane_events(snapshot.longest_lane);
  buffers->set_lane_capacity(config_.lane_capacity);
  buffers->set_delayed_events(snapshot.delayed_events);
  buffers->set_blocked_events(snapshot.blocked_events);
  for (size_t i = 0; i < config_.processors.size(); ++i) {
    const ProcessorSnapshot state =
        i < snapshot.processors.size() ? snapshot.processors[i] : ProcessorSnapshot{};
    v1::ProcessorStatus* processor = response->add_processors();
    processor->set_name(config_.processors[i].name);
    processor->set_streams(state.connected_streams);
    processor->set_streams_configured(config_.processors[i].streams);
    processor->set_credit(state.credit);
    processor->set_in_flight(state.in_flight);
    processor->set_rate_limit_events_per_second(state.rate_limit_eps);
    processor->set_rate_limit_burst(state.rate_limit_burst);
    processor->set_rate_limit_overridden(state.rate_limit_overridden);
    processor->set_concurrency_limit(state.concurrency_limit);
    processor->set_concurrency_adaptive(state.concurrency_adaptive);
    processor->set_circuit_breaker(state.breaker_enabled ? BreakerStateName(state.breaker_state)
                                                         : "off");
    processor->set_circuit_breaker_opened(state.breaker_opened);
  }
  FillCounters(response);
}

void StatusMetrics::FillCounters(v1::GetStatusResponse* response) const {
  if (counters_ == nullptr) return;
  Collected collected;
  for (const MetricFamily& family : counters_->Collect()) {
    for (const ClientMetric& metric : family.metric) AddSeries(family, metric, &collected);
  }
  *response->mutable_counters() = std::move(collected.counters);
  for (auto& [key, series] : collected.processing) {
    *response->add_processing() = std::move(series);
  }
  for (v1::ProcessorStatus& processor : *response->mutable_processors()) {
    auto it = collected.streams.find(processor.name());
    if (it == collected.streams.end()) continue;
    processor.set_streams_opened(it->second.first);
    processor.set_stream_resets(it->second.second);
  }
}

}  // namespace ferry
