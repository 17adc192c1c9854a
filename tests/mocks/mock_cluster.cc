#include "tests/mocks/mock_cluster.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <string>

#include "gtest/gtest.h"

namespace ferry::testing {

MockCluster::MockCluster() {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The host handle itself connects nowhere; keep it from warning so.
  rd_kafka_conf_set(conf, "log_level", "3", error, sizeof(error));
  handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  if (handle_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    ADD_FAILURE() << "rd_kafka_new: " << error;
    return;
  }
  cluster_ = rd_kafka_mock_cluster_new(handle_, 1);
  if (cluster_ == nullptr) ADD_FAILURE() << "rd_kafka_mock_cluster_new failed";
}

MockCluster::~MockCluster() {
  if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
  if (handle_ != nullptr) rd_kafka_destroy(handle_);
}

std::string MockCluster::bootstrap() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }

rd_kafka_resp_err_t MockCluster::CreateTopic(const std::string& topic, int partitions) {
  return rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
}

}  // namespace ferry::testing
