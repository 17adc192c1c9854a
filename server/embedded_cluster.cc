#include "server/embedded_cluster.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/config/group_protocol.h"
#include "core/common/log.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Create(
    const std::vector<std::string>& topics, int partitions) {
  auto self = std::unique_ptr<EmbeddedCluster>(new EmbeddedCluster());
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The host handle has no bootstrap.servers by design; without this its
  // "No `bootstrap.servers` configured" notice would open every demo log.
  // Warnings and errors still show.
  rd_kafka_conf_set(conf, "log_level", "4", error, sizeof(error));
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

namespace {

bool WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return false;
    out << contents;
    if (!out.flush()) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::StartFor(Config& config) {
  std::vector<std::string> topics;
  for (const TopicConfig& topic : config.topics) topics.push_back(topic.name);
  absl::StatusOr<std::unique_ptr<EmbeddedCluster>> cluster =
      Create(topics, config.embedded_partitions);
  if (!cluster.ok()) return cluster.status();
  absl::Status control_topic = (*cluster)->CreateTopic(config.control_topic, 1);
  if (!control_topic.ok()) return control_topic;
  const std::string& servers = (*cluster)->bootstrap_servers();
  config.kafka["bootstrap.servers"] = servers;
  // The mock cluster waits session.timeout.ms - 1s in a rebalance; keep it
  // short so the demo starts in seconds. With group.protocol: consumer
  // (KIP-848) the (mock) broker owns both settings and the client may not
  // set them.
  if (UsesConsumerGroupProtocol(config.kafka)) {
    rd_kafka_mock_set_group_consumer_session_timeout_ms((*cluster)->cluster_, 6000);
    rd_kafka_mock_set_group_consumer_heartbeat_interval_ms((*cluster)->cluster_, 500);
  } else {
    config.kafka.emplace("session.timeout.ms", "6000");
    config.kafka.emplace("heartbeat.interval.ms", "500");
  }
  LogWarn("ferry", "**************************************************************");
  LogWarn("ferry", "* NO kafka.bootstrap.servers CONFIGURED: using the EMBEDDED     *");
  LogWarn("ferry", "* in-process MOCK Kafka cluster at ", servers);
  LogWarn("ferry", "* It is NOT durable; everything is lost on exit. For trying    *");
  LogWarn("ferry", "* ferry out only. Set kafka.bootstrap.servers for real use.    *");
  LogWarn("ferry", "**************************************************************");
  if (!config.embedded_bootstrap_file.empty() &&
      !WriteFileAtomically(config.embedded_bootstrap_file, servers)) {
    return absl::InternalError(
        absl::StrCat("cannot write embedded.bootstrap_file ", config.embedded_bootstrap_file));
  }
  return cluster;
}

EmbeddedCluster::~EmbeddedCluster() {
  if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
  if (handle_ != nullptr) rd_kafka_destroy(handle_);
}

}  // namespace ferry
