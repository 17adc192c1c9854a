// KafkaAdmin: the one helper for topic administration and offset queries
// (create, describe, watermarks, offsets for a timestamp). The control log
// (core/control), the test tools (tests/tools/kafka_admin) and the benchmark
// (bench/bench_produce) create and inspect topics through it.
//
// RAII: it owns a producer-type librdkafka handle (it never joins a consumer
// group) and the queue admin results arrive on; both die with it. It uses
// librdkafka's C API, as the C++ API has no Admin client. Errors are
// absl::Status from core/common/kafka_status.
//
// Topic lookups list all topics (DescribeTopic), so they never make a broker
// auto-create the topic; only PartitionCountByName asks for one topic by
// name, which a broker that allows it answers by creating it.
//
// Threading: every method from any thread; each blocks for at most about its
// timeout. CreateTopic calls are serialised (they share the result queue).
#ifndef FERRY_CORE_KAFKA_ADMIN_H_
#define FERRY_CORE_KAFKA_ADMIN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;

namespace ferry {

struct TopicSpec {
  std::string name;
  int32_t partitions = 1;
  int16_t replication_factor = -1;  // -1: the broker's default
  std::vector<std::pair<std::string, std::string>> config;  // e.g. retention.ms=-1
};

struct TopicDescription {
  // The topic's own error in the metadata (e.g. no leader yet); OK normally.
  absl::Status status;
  std::vector<int32_t> partitions;  // ids, sorted
  bool all_led = false;             // every partition has a leader
};

class KafkaAdmin {
 public:
  // `properties` are librdkafka client properties (bootstrap.servers,
  // security); consumer-only ones are left out. `context` names the user in
  // error messages ("control topic"). Touches no broker.
  static absl::StatusOr<std::unique_ptr<KafkaAdmin>> Create(
      const std::map<std::string, std::string>& properties, const std::string& context);
  ~KafkaAdmin();
  KafkaAdmin(const KafkaAdmin&) = delete;
  KafkaAdmin& operator=(const KafkaAdmin&) = delete;

  // Number of brokers the cluster's metadata lists.
  absl::StatusOr<int> BrokerCount(absl::Duration timeout);
  // Whether the controller (where CreateTopics goes) is one of the brokers;
  // librdkafka's mock cluster names one that is not.
  absl::StatusOr<bool> ControllerIsABroker(absl::Duration timeout);
  // `topic` as the metadata of all topics shows it; NotFound when missing.
  absl::StatusOr<TopicDescription> DescribeTopic(const std::string& topic, absl::Duration timeout);
  // Asks for `topic` by name (see above); NotFound when it does not exist.
  absl::StatusOr<int32_t> PartitionCountByName(const std::string& topic, absl::Duration timeout);

  // CreateTopics; AlreadyExists when the broker has the topic.
  absl::Status CreateTopic(const TopicSpec& spec, absl::Duration timeout);
  // CreateTopic, then waits until every partition has a leader (a new
  // topic is usable when this returns). AlreadyExists (checked first) when
  // the topic exists.
  absl::Status CreateTopicAndWait(const TopicSpec& spec, absl::Duration timeout);

  // Earliest and end offset of one partition (a broker round trip).
  absl::StatusOr<std::pair<int64_t, int64_t>> Watermarks(const std::string& topic,
                                                         int32_t partition,
                                                         absl::Duration timeout);
  // The first offset of each partition in `partitions` whose timestamp is
  // >= `timestamp_ms`; -1 where no record is that late.
  absl::StatusOr<std::map<int32_t, int64_t>> OffsetsForTimestamp(
      const std::string& topic, const std::vector<int32_t>& partitions, int64_t timestamp_ms,
      absl::Duration timeout);

 private:
  KafkaAdmin(rd_kafka_t* handle, rd_kafka_queue_t* queue, std::string context);

  rd_kafka_t* const handle_;
  rd_kafka_queue_t* const queue_;
  const std::string context_;
  absl::Mutex create_mu_;  // one CreateTopics on queue_ at a time
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_ADMIN_H_
