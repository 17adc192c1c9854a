// EmbeddedCluster: librdkafka's in-process mock Kafka cluster, which ferry
// starts when the config has no `kafka.bootstrap.servers`, so a new user can
// try ferry with nothing else installed. It is NOT durable: everything is lost
// when ferry exits. ferry says so loudly in its log.
//
// Threading: Create and destruction from the owner thread; the cluster runs
// on librdkafka's own threads.
#ifndef FERRY_SERVER_EMBEDDED_CLUSTER_H_
#define FERRY_SERVER_EMBEDDED_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/config.h"

struct rd_kafka_s;
struct rd_kafka_mock_cluster_s;

namespace ferry {

class EmbeddedCluster {
 public:
  // Starts a one-broker cluster on 127.0.0.1 (random port) and creates the
  // topics with `partitions` partitions each.
  static absl::StatusOr<std::unique_ptr<EmbeddedCluster>> Create(
      const std::vector<std::string>& topics, int partitions);
  // What ferry does when the config has no kafka.bootstrap.servers: starts
  // the cluster with the config's topics and control topic, points
  // `config.kafka` at it (with a short session timeout, so a rebalance takes
  // seconds), logs the not-durable warning and writes
  // embedded.bootstrap_file when set.
  static absl::StatusOr<std::unique_ptr<EmbeddedCluster>> StartFor(Config& config);
  // Destroy it after every Kafka client of it: a client still connected
  // when it goes logs librdkafka's "1/1 brokers are down" ERROR.
  ~EmbeddedCluster();

  // Creates one more topic (the mock cluster has no CreateTopics controller).
  absl::Status CreateTopic(const std::string& topic, int partitions);

  // "127.0.0.1:PORT", for bootstrap.servers.
  const std::string& bootstrap_servers() const { return bootstrap_servers_; }

 private:
  EmbeddedCluster() = default;
  rd_kafka_s* handle_ = nullptr;
  rd_kafka_mock_cluster_s* cluster_ = nullptr;
  std::string bootstrap_servers_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_EMBEDDED_CLUSTER_H_
