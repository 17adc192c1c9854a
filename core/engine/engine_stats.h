// EngineStats: the Engine's Prometheus counters and histograms (the per-event
// path). Gauges that describe state (buffered events, lanes, partitions,
// streams) are not here: server/observability/metrics.h computes them from
// Engine::Snapshot() when /metrics is scraped.
//
// Label sets are bounded by the config, never by the data:
//   processor  a configured processor name, or "none" (no processor: poison
//              records, event types no processor takes)
//   type       an event type named in the config (processors' event_types,
//              topic names of topics whose type is the topic, `const:` types),
//              or "other" for anything else (a "*" processor may see any type)
//   topic      a configured topic, or "other"
//   status     ok | retry | fail | timeout
//   policy     dlq | skip | block
// Every series that can occur is created up front, so rate() works from the
// first scrape.
//
// Threading: the Engine calls every method with its own mutex held (one
// caller at a time); prometheus-cpp metric updates are atomic, so a
// concurrent scrape is safe.
#ifndef FERRY_CORE_ENGINE_ENGINE_STATS_H_
#define FERRY_CORE_ENGINE_ENGINE_STATS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/config/config.h"

namespace ferry {

// kNotAttempted: a run member given back unhandled (core/engine/runs.h).
enum class ResultStatus { kOk = 0, kRetry = 1, kFail = 2, kTimeout = 3, kNotAttempted = 4 };

class EngineStats {
 public:
  static constexpr absl::string_view kNoProcessor = "none";
  static constexpr absl::string_view kOtherType = "other";

  EngineStats(prometheus::Registry& registry, const Config& config);
  EngineStats(const EngineStats&) = delete;
  EngineStats& operator=(const EngineStats&) = delete;

  // The bounded label of an event type, as an index (cheap to carry along).
  int TypeIndex(absl::string_view type) const;
  const std::string& TypeLabel(int type_index) const { return type_labels_[type_index]; }
  const std::vector<std::string>& type_labels() const { return type_labels_; }

  // ---- Kafka side ----
  void RecordConsumed(const std::string& topic, int64_t bytes) { RecordsConsumed(topic, 1, bytes); }
  // `records` records of `topic` weighing `bytes` in all (counted per batch).
  void RecordsConsumed(const std::string& topic, int64_t records, int64_t bytes);
  void PoisonRecord(const std::string& topic);
  void DuplicateRecord() { duplicates_->Increment(); }
  void DroppedOnRevoke(int64_t events) { dropped_on_revoke_->Increment(static_cast<double>(events)); }

  // ---- Per processor and event type (`processor` -1 = none) ----
  // Dispatched: the time the event waited in ferry's queues (consumed, or
  // re-queued after a backoff or a lost stream, until sent). A redelivery is
  // not an attempt.
  void Dispatched(int processor, int type_index, absl::Duration waited, bool redelivery);
  // A result (or a timeout) for a delivery sent `took` ago.
  void Result(int processor, int type_index, ResultStatus status, absl::Duration took);
  // Dispatched() and Result() held until Flush(): the Engine records each
  // event of a dispatch or of a Results message here and adds them to the
  // metrics once per series before it releases its mutex, so a scrape never
  // misses what an Engine call did. A histogram observation takes
  // prometheus-cpp's mutex and every count an atomic add; held, a run of 64
  // events costs one of each per series instead of 64.
  void DeferDispatched(int processor, int type_index, absl::Duration waited, bool redelivery);
  void DeferResult(int processor, int type_index, ResultStatus status, absl::Duration took);
  void Flush();
  void Redelivered(int processor, int type_index);
  // A terminal failure and the policy it took (dlq, skip, block).
  void TerminalFailure(int processor, int type_index, FailurePolicy policy);
  void DeadLettered(int processor, int type_index);
  void DeadLetterError() { dead_letter_errors_->Increment(); }

  // ---- Per processor ----
  void StaleResults(int processor, int64_t count);
  void ProtocolError(int processor);
  // An event failed because its worker stream kept being lost
  // (core/engine/redelivery.h); it also counts as a terminal failure.
  void RedeliveryLimit(int processor);
  // A run of `members` events was sent (core/engine/runs.h).
  void Run(int processor, int64_t members);

 private:
  struct Series {
    prometheus::Histogram* enqueue = nullptr;
    prometheus::Histogram* processing = nullptr;
    std::array<prometheus::Counter*, 5> results{};
    prometheus::Counter* attempts = nullptr;
    prometheus::Counter* redeliveries = nullptr;
    std::array<prometheus::Counter*, 3> terminal_failures{};
    prometheus::Counter* dead_lettered = nullptr;
  };
  struct PerTopic {
    prometheus::Counter* records = nullptr;
    prometheus::Counter* bytes = nullptr;
    prometheus::Counter* poison = nullptr;
  };
  struct PerProcessor {
    prometheus::Counter* stale_results = nullptr;
    prometheus::Counter* protocol_errors = nullptr;
    prometheus::Counter* redelivery_limit = nullptr;
    prometheus::Counter* runs = nullptr;
    prometheus::Counter* run_events = nullptr;
  };

  // Observations of one histogram not yet added (DeferDispatched, DeferResult).
  struct HeldObservations {
    std::vector<double> buckets;  // per bucket of DurationBuckets(), then +Inf
    double sum = 0;
    int64_t count = 0;
    double last = 0;  // the only one, when count is 1 (observed as is)
    void Add(double seconds);
    void FlushTo(prometheus::Histogram& histogram);
  };
  struct Held {
    Series* series = nullptr;
    HeldObservations enqueue;
    HeldObservations processing;
    int64_t attempts = 0;
    std::array<int64_t, 5> results{};
  };
  Held& HeldFor(int processor, int type_index);

  // The processor, type and topic labels of `config`.
  void AddLabels(const Config& config);
  void RegisterFamilies(prometheus::Registry& registry);
  const std::string& ProcessorLabel(int processor) const;
  // Creates the series on first use (the reachable ones exist from the start).
  Series& For(int processor, int type_index);
  PerTopic& ForTopic(const std::string& topic);
  PerProcessor& ForProcessor(int processor);

  std::vector<std::string> processor_labels_;  // [0] = "none", then processors
  std::vector<std::string> type_labels_;       // [0] = "other"
  std::map<std::string, int, std::less<>> type_index_;
  std::vector<std::string> topics_;

  prometheus::Family<prometheus::Histogram>* enqueue_family_;
  prometheus::Family<prometheus::Histogram>* processing_family_;
  prometheus::Family<prometheus::Counter>* results_family_;
  prometheus::Family<prometheus::Counter>* attempts_family_;
  prometheus::Family<prometheus::Counter>* redeliveries_family_;
  prometheus::Family<prometheus::Counter>* terminal_failures_family_;
  prometheus::Family<prometheus::Counter>* dead_lettered_family_;
  prometheus::Family<prometheus::Counter>* records_family_;
  prometheus::Family<prometheus::Counter>* bytes_family_;
  prometheus::Family<prometheus::Counter>* poison_family_;
  prometheus::Family<prometheus::Counter>* stale_family_;
  prometheus::Family<prometheus::Counter>* protocol_errors_family_;
  prometheus::Family<prometheus::Counter>* redelivery_limit_family_;
  prometheus::Family<prometheus::Counter>* runs_family_;
  prometheus::Family<prometheus::Counter>* run_events_family_;
  prometheus::Counter* duplicates_;
  prometheus::Counter* dropped_on_revoke_;
  prometheus::Counter* dead_letter_errors_;

  // [processor + 1][type_index]
  std::vector<std::vector<std::unique_ptr<Series>>> series_;
  std::map<std::string, PerTopic, std::less<>> per_topic_;
  std::vector<PerProcessor> per_processor_;  // [processor + 1]
  // Series with held observations: held_[0, held_in_use_); the entries past
  // it are kept for their buckets' memory.
  std::vector<Held> held_;
  size_t held_in_use_ = 0;
};

// Histogram buckets of the enqueue and processing times, in seconds.
const std::vector<double>& DurationBuckets();

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_ENGINE_STATS_H_
