#include "core/engine/engine_stats.h"

#include <utility>

namespace ferry {
namespace {

constexpr std::array<const char*, 4> kStatusLabels = {"ok", "retry", "fail", "timeout"};
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

}  // namespace

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                              5,      10,    30,     60,    300};
  return buckets;
}

EngineStats::EngineStats(prometheus::Registry& registry, const Config& config) {
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
  std::map<std::string, int> processor_by_type;
  int default_processor = -1;
  for (size_t i = 0; i < config.processors.size(); ++i) {
    for (const std::string& type : config.processors[i].event_types) {
      if (type == "*") {
        default_processor = static_cast<int>(i);
      } else {
        processor_by_type[type] = static_cast<int>(i);
        add_type(type);
      }
    }
  }
  for (const TopicConfig& topic : config.topics) {
    topics_.push_back(topic.name);
    if (topic.type.kind == FieldSource::Kind::kTopic) add_type(topic.name);
    if (topic.type.kind == FieldSource::Kind::kConstant) add_type(topic.type.argument);
  }

  enqueue_family_ = &prometheus::BuildHistogram()
                         .Name("ferry_enqueue_duration_seconds")
                         .Help("Enqueue time: how long an event waited in ferry's queues before "
                               "it was dispatched (record consumed, or re-queued after a retry "
                               "backoff or a lost stream, until sent to a worker)")
                         .Register(registry);
  processing_family_ = &prometheus::BuildHistogram()
                            .Name("ferry_processing_duration_seconds")
                            .Help("Processing time: dispatched to a worker until its result "
                                  "(timeouts count with the time waited)")
                            .Register(registry);
  results_family_ = &prometheus::BuildCounter()
                         .Name("ferry_results_total")
                         .Help("Results of deliveries by status: ok, retry, fail (FAIL or "
                               "unspecified), timeout (deadline passed)")
                         .Register(registry);
  attempts_family_ = &prometheus::BuildCounter()
                          .Name("ferry_attempts_total")
                          .Help("Processing attempts dispatched to workers (first attempts and "
                                "retries; redeliveries after a lost stream are not attempts)")
                          .Register(registry);
  redeliveries_family_ = &prometheus::BuildCounter()
                              .Name("ferry_redeliveries_total")
                              .Help("In-flight events queued again because their worker "
                                    "stream was lost or reset")
                              .Register(registry);
  terminal_failures_family_ = &prometheus::BuildCounter()
                                   .Name("ferry_terminal_failures_total")
                                   .Help("Events that failed for good (FAIL, attempts "
                                         "exhausted, timeout, no processor, poison) by the "
                                         "policy applied: dlq, skip, block")
                                   .Register(registry);
  dead_lettered_family_ = &prometheus::BuildCounter()
                               .Name("ferry_dead_lettered_total")
                               .Help("Dead letters acknowledged by Kafka")
                               .Register(registry);
  records_family_ = &prometheus::BuildCounter()
                         .Name("ferry_records_consumed_total")
                         .Help("Records accepted from Kafka as events (duplicates and "
                               "records of revoked partitions excluded)")
                         .Register(registry);
  bytes_family_ = &prometheus::BuildCounter()
                       .Name("ferry_consumed_bytes_total")
                       .Help("Bytes (key + payload + headers) of the records accepted")
                       .Register(registry);
  poison_family_ = &prometheus::BuildCounter()
                        .Name("ferry_poison_records_total")
                        .Help("Records that could not become events (undecodable, oversize)")
                        .Register(registry);
  stale_family_ = &prometheus::BuildCounter()
                       .Name("ferry_stale_results_total")
                       .Help("Fenced results dropped: unknown, duplicate, timed-out or "
                             "revoked-partition delivery ids")
                       .Register(registry);
  protocol_errors_family_ = &prometheus::BuildCounter()
                                 .Name("ferry_worker_protocol_errors_total")
                                 .Help("Malformed worker traffic (the stream is reset when it "
                                       "cannot continue)")
                                 .Register(registry);
  redelivery_limit_family_ = &prometheus::BuildCounter()
                                  .Name("ferry_redelivery_limit_total")
                                  .Help("Events that took the failure policy because their "
                                        "worker stream was lost too many times while they "
                                        "were in flight (a message workers keep rejecting)")
                                  .Register(registry);
  duplicates_ = &prometheus::BuildCounter()
                     .Name("ferry_duplicate_records_total")
                     .Help("Records read twice within one assignment, ignored")
                     .Register(registry)
                     .Add({});
  dropped_on_revoke_ = &prometheus::BuildCounter()
                            .Name("ferry_revoked_events_dropped_total")
                            .Help("Unfinished events dropped because their partition was "
                                  "revoked (the new owner re-reads them)")
                            .Register(registry)
                            .Add({});
  dead_letter_errors_ = &prometheus::BuildCounter()
                             .Name("ferry_dead_letter_errors_total")
                             .Help("Dead-letter writes that failed (each is retried)")
                             .Register(registry)
                             .Add({});

  series_.resize(processor_labels_.size());
  for (auto& row : series_) row.resize(type_labels_.size());
  per_processor_.resize(processor_labels_.size());
  for (const std::string& topic : topics_) ForTopic(topic);
  for (int p = -1; p < static_cast<int>(config.processors.size()); ++p) ForProcessor(p);
  // The reachable (processor, type) pairs, so their series exist at zero.
  for (size_t t = 1; t < type_labels_.size(); ++t) {
    auto it = processor_by_type.find(type_labels_[t]);
    For(it != processor_by_type.end() ? it->second : default_processor, static_cast<int>(t));
  }
  For(default_processor, 0);
  For(-1, 0);  // poison records
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
  }
  return entry;
}

void EngineStats::RecordConsumed(const std::string& topic, int64_t bytes) {
  PerTopic& entry = ForTopic(topic);
  entry.records->Increment();
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
  series.processing->Observe(absl::ToDoubleSeconds(took));
  series.results[static_cast<size_t>(status)]->Increment();
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

void EngineStats::RedeliveryLimit(int processor) {
  ForProcessor(processor).redelivery_limit->Increment();
}

}  // namespace ferry
