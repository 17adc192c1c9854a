#include "core/engine/engine_stats.h"

#include <algorithm>
#include <utility>

#include "core/engine/event_router.h"

namespace ferry {
namespace {

constexpr std::array<const char*, 5> kStatusLabels = {"ok", "retry", "fail", "timeout",
                                                      "not_attempted"};
constexpr std::array<const char*, 3> kPolicyLabels = {"dlq", "skip", "block"};

int PolicyIndex(FailurePolicy policy) {
  switch (policy) {
    case FailurePolicy::kDeadLetter:
      return 0;
    case FailurePolicy::kSkip:
      return 1;
    case FailurePolicy::kBlock:
      return 2;
  }
  return 1;
}

prometheus::Family<prometheus::Counter>* CounterFamily(prometheus::Registry& registry,
                                                       const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>* HistogramFamily(prometheus::Registry& registry,
                                                           const char* name, const char* help) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                              5,      10,    30,     60,    300};
  return buckets;
}

EngineStats::EngineStats(prometheus::Registry& registry, const Config& config) {
  AddLabels(config);
  RegisterFamilies(registry);
  series_.resize(processor_labels_.size());
  for (auto& row : series_) row.resize(type_labels_.size());
  per_processor_.resize(processor_labels_.size());
  for (const std::string& topic : topics_) ForTopic(topic);
  for (int p = -1; p < static_cast<int>(config.processors.size()); ++p) ForProcessor(p);
  // The reachable (processor, type) pairs, so their series exist at zero.
  const EventRouter router(config);
  for (size_t t = 1; t < type_labels_.size(); ++t) {
    For(router.ProcessorFor(type_labels_[t]), static_cast<int>(t));
  }
  For(router.default_processor(), 0);
  For(-1, 0);  // poison records
}

void EngineStats::AddLabels(const Config& config) {
  processor_labels_.emplace_back(kNoProcessor);
  for (const ProcessorConfig& processor : config.processors) {
    processor_labels_.push_back(processor.name);
  }
  // Event types the config names; everything else is "other".
  type_labels_.emplace_back(kOtherType);
  auto add_type = [this](const std::string& type) {
    if (type.empty() || type == "*" || type_index_.count(type) > 0) return;
    type_index_.emplace(type, static_cast<int>(type_labels_.size()));
    type_labels_.push_back(type);
  };
  for (const ProcessorConfig& processor : config.processors) {
    for (const std::string& type : processor.event_types) add_type(type);
  }
  for (const TopicConfig& topic : config.topics) {
    topics_.push_back(topic.name);
    if (topic.type.kind == FieldSource::Kind::kTopic) add_type(topic.name);
    if (topic.type.kind == FieldSource::Kind::kConstant) add_type(topic.type.argument);
  }
}

void EngineStats::RegisterFamilies(prometheus::Registry& registry) {
  enqueue_family_ = HistogramFamily(
      registry, "ferry_enqueue_duration_seconds",
      "Enqueue time: how long an event waited in ferry's queues before it was dispatched "
      "(record consumed, or re-queued after a retry backoff or a lost stream, until sent to "
      "a worker)");
  processing_family_ = HistogramFamily(
      registry, "ferry_processing_duration_seconds",
      "Processing time: dispatched to a worker until its result (timeouts count with the "
      "time waited)");
  results_family_ = CounterFamily(
      registry, "ferry_results_total",
      "Results of deliveries by status: ok, retry, fail (FAIL or unspecified), timeout "
      "(deadline passed)");
  attempts_family_ = CounterFamily(
      registry, "ferry_attempts_total",
      "Processing attempts dispatched to workers (first attempts and retries; redeliveries "
      "after a lost stream are not attempts)");
  redeliveries_family_ = CounterFamily(
      registry, "ferry_redeliveries_total",
      "In-flight events queued again because their worker stream was lost or reset");
  terminal_failures_family_ = CounterFamily(
      registry, "ferry_terminal_failures_total",
      "Events that failed for good (FAIL, attempts exhausted, timeout, no processor, poison) "
      "by the policy applied: dlq, skip, block");
  dead_lettered_family_ = CounterFamily(registry, "ferry_dead_lettered_total",
                                        "Dead letters acknowledged by Kafka");
  records_family_ = CounterFamily(
      registry, "ferry_records_consumed_total",
      "Records accepted from Kafka as events (duplicates and records of revoked partitions "
      "excluded)");
  bytes_family_ = CounterFamily(registry, "ferry_consumed_bytes_total",
                                "Bytes (key + payload + headers) of the records accepted");
  poison_family_ = CounterFamily(registry, "ferry_poison_records_total",
                                 "Records that could not become events (undecodable, oversize)");
  stale_family_ = CounterFamily(
      registry, "ferry_stale_results_total",
      "Fenced results dropped: unknown, duplicate, timed-out or revoked-partition delivery ids");
  protocol_errors_family_ = CounterFamily(
      registry, "ferry_worker_protocol_errors_total",
      "Malformed worker traffic (the stream is reset when it cannot continue)");
  redelivery_limit_family_ = CounterFamily(
      registry, "ferry_redelivery_limit_total",
      "Events that took the failure policy because their worker stream was lost too many "
      "times while they were in flight (a message workers keep rejecting)");
  runs_family_ = CounterFamily(registry, "ferry_runs_total",
                               "Runs sent: consecutive events of one lane in one message "
                               "(workers with Ready.max_run > 1)");
  run_events_family_ = CounterFamily(registry, "ferry_run_events_total",
                                     "Deliveries sent as members of a run");
  duplicates_ = &CounterFamily(registry, "ferry_duplicate_records_total",
                               "Records read twice within one assignment, ignored")
                     ->Add({});
  dropped_on_revoke_ = &CounterFamily(registry, "ferry_revoked_events_dropped_total",
                                      "Unfinished events dropped because their partition was "
                                      "revoked (the new owner re-reads them)")
                            ->Add({});
  dead_letter_errors_ = &CounterFamily(registry, "ferry_dead_letter_errors_total",
                                       "Dead-letter writes that failed (each is retried)")
                             ->Add({});
}

int EngineStats::TypeIndex(absl::string_view type) const {
  auto it = type_index_.find(type);
  return it != type_index_.end() ? it->second : 0;
}

const std::string& EngineStats::ProcessorLabel(int processor) const {
  const size_t index = static_cast<size_t>(processor + 1);
  return index < processor_labels_.size() ? processor_labels_[index] : processor_labels_[0];
}

EngineStats::Series& EngineStats::For(int processor, int type_index) {
  size_t row = static_cast<size_t>(processor + 1);
  if (row >= series_.size()) row = 0;
  if (type_index < 0 || static_cast<size_t>(type_index) >= type_labels_.size()) type_index = 0;
  std::unique_ptr<Series>& slot = series_[row][static_cast<size_t>(type_index)];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<Series>();
  const std::string& processor_label = processor_labels_[row];
  const std::string& type_label = type_labels_[static_cast<size_t>(type_index)];
  const prometheus::Labels labels = {{"processor", processor_label}, {"type", type_label}};
  slot->enqueue = &enqueue_family_->Add(labels, DurationBuckets());
  slot->processing = &processing_family_->Add(labels, DurationBuckets());
  for (size_t i = 0; i < kStatusLabels.size(); ++i) {
    slot->results[i] = &results_family_->Add(
        {{"processor", processor_label}, {"type", type_label}, {"status", kStatusLabels[i]}});
  }
  slot->attempts = &attempts_family_->Add(labels);
  slot->redeliveries = &redeliveries_family_->Add(labels);
  for (size_t i = 0; i < kPolicyLabels.size(); ++i) {
    slot->terminal_failures[i] = &terminal_failures_family_->Add(
        {{"processor", processor_label}, {"type", type_label}, {"policy", kPolicyLabels[i]}});
  }
  slot->dead_lettered = &dead_lettered_family_->Add(labels);
  return *slot;
}

EngineStats::PerTopic& EngineStats::ForTopic(const std::string& topic) {
  auto it = per_topic_.find(topic);
  if (it != per_topic_.end()) return it->second;
  bool known = false;
  for (const std::string& configured : topics_) known = known || configured == topic;
  const std::string label = known ? topic : std::string(kOtherType);
  it = per_topic_.find(label);
  if (it != per_topic_.end()) return it->second;
  PerTopic& entry = per_topic_[label];
  entry.records = &records_family_->Add({{"topic", label}});
  entry.bytes = &bytes_family_->Add({{"topic", label}});
  entry.poison = &poison_family_->Add({{"topic", label}});
  return entry;
}

EngineStats::PerProcessor& EngineStats::ForProcessor(int processor) {
  size_t index = static_cast<size_t>(processor + 1);
  if (index >= per_processor_.size()) index = 0;
  PerProcessor& entry = per_processor_[index];
  if (entry.stale_results == nullptr) {
    const prometheus::Labels labels = {{"processor", processor_labels_[index]}};
    entry.stale_results = &stale_family_->Add(labels);
    entry.protocol_errors = &protocol_errors_family_->Add(labels);
    entry.redelivery_limit = &redelivery_limit_family_->Add(labels);
    entry.runs = &runs_family_->Add(labels);
    entry.run_events = &run_events_family_->Add(labels);
  }
  return entry;
}

void EngineStats::RecordsConsumed(const std::string& topic, int64_t records, int64_t bytes) {
  PerTopic& entry = ForTopic(topic);
  entry.records->Increment(static_cast<double>(records));
  entry.bytes->Increment(static_cast<double>(bytes));
}

void EngineStats::PoisonRecord(const std::string& topic) { ForTopic(topic).poison->Increment(); }

void EngineStats::Dispatched(int processor, int type_index, absl::Duration waited,
                             bool redelivery) {
  Series& series = For(processor, type_index);
  series.enqueue->Observe(absl::ToDoubleSeconds(waited));
  if (!redelivery) series.attempts->Increment();
}

void EngineStats::Result(int processor, int type_index, ResultStatus status,
                         absl::Duration took) {
  Series& series = For(processor, type_index);
  // A run member answered NOT_ATTEMPTED was never handled: its wait behind
  // the member that failed is not processing time (it is counted, and its
  // next dispatch observes the enqueue histogram again).
  if (status != ResultStatus::kNotAttempted) {
    series.processing->Observe(absl::ToDoubleSeconds(took));
  }
  series.results[static_cast<size_t>(status)]->Increment();
}

void EngineStats::HeldObservations::Add(double seconds) {
  const std::vector<double>& bounds = DurationBuckets();
  if (buckets.empty()) buckets.assign(bounds.size() + 1, 0);
  // The first bucket whose upper bound is >= the value, as Histogram::Observe.
  buckets[static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), seconds) -
                              bounds.begin())] += 1;
  sum += seconds;
  ++count;
  last = seconds;
}

void EngineStats::HeldObservations::FlushTo(prometheus::Histogram& histogram) {
  if (count == 0) return;
  // One observation as is: ObserveMultiple adds to every bucket.
  if (count == 1) {
    histogram.Observe(last);
  } else {
    histogram.ObserveMultiple(buckets, sum);
  }
  std::fill(buckets.begin(), buckets.end(), 0);
  sum = 0;
  count = 0;
}

EngineStats::Held& EngineStats::HeldFor(int processor, int type_index) {
  Series* series = &For(processor, type_index);
  for (size_t i = 0; i < held_in_use_; ++i) {
    if (held_[i].series == series) return held_[i];
  }
  if (held_in_use_ == held_.size()) held_.emplace_back();
  Held& held = held_[held_in_use_++];
  held.series = series;
  return held;
}

void EngineStats::DeferDispatched(int processor, int type_index, absl::Duration waited,
                                  bool redelivery) {
  Held& held = HeldFor(processor, type_index);
  held.enqueue.Add(absl::ToDoubleSeconds(waited));
  if (!redelivery) ++held.attempts;
}

void EngineStats::DeferResult(int processor, int type_index, ResultStatus status,
                              absl::Duration took) {
  Held& held = HeldFor(processor, type_index);
  // As in Result(): NOT_ATTEMPTED is counted but is no processing time.
  if (status != ResultStatus::kNotAttempted) held.processing.Add(absl::ToDoubleSeconds(took));
  ++held.results[static_cast<size_t>(status)];
}

void EngineStats::Flush() {
  for (size_t i = 0; i < held_in_use_; ++i) {
    Held& held = held_[i];
    held.enqueue.FlushTo(*held.series->enqueue);
    held.processing.FlushTo(*held.series->processing);
    if (held.attempts > 0) held.series->attempts->Increment(static_cast<double>(held.attempts));
    held.attempts = 0;
    for (size_t status = 0; status < held.results.size(); ++status) {
      if (held.results[status] == 0) continue;
      held.series->results[status]->Increment(static_cast<double>(held.results[status]));
      held.results[status] = 0;
    }
  }
  held_in_use_ = 0;
}

void EngineStats::Redelivered(int processor, int type_index) {
  For(processor, type_index).redeliveries->Increment();
}

void EngineStats::TerminalFailure(int processor, int type_index, FailurePolicy policy) {
  For(processor, type_index).terminal_failures[static_cast<size_t>(PolicyIndex(policy))]
      ->Increment();
}

void EngineStats::DeadLettered(int processor, int type_index) {
  For(processor, type_index).dead_lettered->Increment();
}

void EngineStats::StaleResults(int processor, int64_t count) {
  ForProcessor(processor).stale_results->Increment(static_cast<double>(count));
}

void EngineStats::ProtocolError(int processor) { ForProcessor(processor).protocol_errors->Increment(); }

void EngineStats::Run(int processor, int64_t members) {
  PerProcessor& entry = ForProcessor(processor);
  entry.runs->Increment();
  entry.run_events->Increment(static_cast<double>(members));
}

void EngineStats::RedeliveryLimit(int processor) {
  ForProcessor(processor).redelivery_limit->Increment();
}

}  // namespace ferry
