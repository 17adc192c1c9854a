#include "server/embedded_cluster.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Create(
    const std::vector<std::string>& topics, int partitions) {
  auto self = std::unique_ptr<EmbeddedCluster>(new EmbeddedCluster());
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The mock cluster needs a host client instance; a producer is the lightest.
  self->handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  if (self->handle_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    return absl::InternalError(absl::StrCat("embedded cluster: ", error));
  }
  self->cluster_ = rd_kafka_mock_cluster_new(self->handle_, 1);
  if (self->cluster_ == nullptr) {
    return absl::InternalError("embedded cluster: rd_kafka_mock_cluster_new failed");
  }
  for (const std::string& topic : topics) {
    const rd_kafka_resp_err_t created =
        rd_kafka_mock_topic_create(self->cluster_, topic.c_str(), partitions, 1);
    if (created != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::InternalError(absl::StrCat("embedded cluster: creating topic ", topic, ": ",
                                              rd_kafka_err2str(created)));
    }
  }
  self->bootstrap_servers_ = rd_kafka_mock_cluster_bootstraps(self->cluster_);
  return self;
}

absl::Status EmbeddedCluster::CreateTopic(const std::string& topic, int partitions) {
  const rd_kafka_resp_err_t created =
      rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
  if (created != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(absl::StrCat("embedded cluster: creating topic ", topic, ": ",
                                            rd_kafka_err2str(created)));
  }
  return absl::OkStatus();
}

EmbeddedCluster::~EmbeddedCluster() {
  if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
  if (handle_ != nullptr) rd_kafka_destroy(handle_);
}

}  // namespace ferry
