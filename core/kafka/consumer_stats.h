// ConsumerStats: the Kafka consumer's Prometheus counters: commits and commit
// errors, rebalances, fetch pauses, consume and client errors. Per-partition
// state (lag, end and committed offsets, paused) is a gauge computed at
// scrape time (server/observability/metrics.h) from KafkaConsumer::FetchStates().
//
// Threading: counters are atomic; safe from any thread.
#ifndef FERRY_CORE_KAFKA_CONSUMER_STATS_H_
#define FERRY_CORE_KAFKA_CONSUMER_STATS_H_

#include <prometheus/counter.h>
#include <prometheus/registry.h>

namespace ferry {

class ConsumerStats {
 public:
  explicit ConsumerStats(prometheus::Registry& registry);
  ConsumerStats(const ConsumerStats&) = delete;
  ConsumerStats& operator=(const ConsumerStats&) = delete;

  // A commit request to the group coordinator and its outcome.
  void Commit(bool ok) { (ok ? commits_ : commit_errors_)->Increment(); }
  // Rebalance callbacks: partitions assigned, revoked (committed first), or
  // lost (not committed).
  void Assigned() { assigned_->Increment(); }
  void Revoked(bool lost) { (lost ? lost_ : revoked_)->Increment(); }
  // Fetching paused because ferry's buffers reached their budget.
  void BackpressurePause() { backpressure_pauses_->Increment(); }
  void ConsumeError() { consume_errors_->Increment(); }
  void ClientError() { client_errors_->Increment(); }

 private:
  prometheus::Counter* commits_;
  prometheus::Counter* commit_errors_;
  prometheus::Counter* assigned_;
  prometheus::Counter* revoked_;
  prometheus::Counter* lost_;
  prometheus::Counter* backpressure_pauses_;
  prometheus::Counter* consume_errors_;
  prometheus::Counter* client_errors_;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_CONSUMER_STATS_H_
