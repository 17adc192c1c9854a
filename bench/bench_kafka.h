// The Kafka consumer set-up shared by ferry's bench programs (bench/README.md):
// baseline A (bench_consume) and the transport floor (transport_floor) read
// the topic with the same librdkafka settings, so that the floor differs from
// A only by what it adds (the gRPC hop), never by how it consumes.
//
// Threading: BenchConsumer is used from one thread (librdkafka's
// KafkaConsumer::consume is not meant for concurrent callers here); its
// rebalance callback runs inside consume() on that same thread.
#ifndef FERRY_BENCH_BENCH_KAFKA_H_
#define FERRY_BENCH_BENCH_KAFKA_H_

#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::bench {

struct ConsumerOptions {
  std::string bootstrap;
  std::string topic;
  std::string group;      // empty: a fresh group named <client_id>-<wall us>
  std::string client_id;  // e.g. "ferry-bench-a"
  // Written (atomically) with the number of assigned partitions once the
  // group assigned them: the harness starts producing after that.
  std::string ready_file;
  // Extra librdkafka properties ("name=value"), applied after the defaults
  // (so they can override them): --floor_kafka in the harness, e.g.
  // fetch.queue.backoff.ms=10.
  std::vector<std::string> extra;
};

// Splits "a=1,b=2" into {"a=1","b=2"} (empty entries dropped).
std::vector<std::string> SplitProperties(const std::string& list);

// A subscribed KafkaConsumer with baseline A's settings: fresh group, from
// the earliest offset, no commits, no offset store, no partition EOF events.
class BenchConsumer {
 public:
  static absl::StatusOr<std::unique_ptr<BenchConsumer>> Create(const ConsumerOptions& options);
  ~BenchConsumer();

  RdKafka::KafkaConsumer* consumer() { return consumer_.get(); }
  const std::string& group() const { return group_; }

 private:
  class Rebalance;
  BenchConsumer() = default;

  std::string group_;
  std::unique_ptr<Rebalance> rebalance_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
};

}  // namespace ferry::bench

#endif  // FERRY_BENCH_BENCH_KAFKA_H_
