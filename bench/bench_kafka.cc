#include "bench/bench_kafka.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"

namespace ferry::bench {

std::vector<std::string> SplitProperties(const std::string& list) {
  return absl::StrSplit(list, ',', absl::SkipWhitespace());
}

// Assigns what the group gives and tells the harness (ready_file) once it has.
class BenchConsumer::Rebalance : public RdKafka::RebalanceCb {
 public:
  explicit Rebalance(std::string ready_file) : ready_file_(std::move(ready_file)) {}
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      consumer->assign(partitions);
      if (!ready_file_.empty()) {
        WriteFileAtomically(ready_file_, absl::StrCat(partitions.size(), "\n"));
      }
    } else {
      consumer->unassign();
    }
  }

 private:
  std::string ready_file_;
};

absl::StatusOr<std::unique_ptr<BenchConsumer>> BenchConsumer::Create(
    const ConsumerOptions& options) {
  if (options.bootstrap.empty() || options.topic.empty()) {
    return absl::InvalidArgumentError("need a bootstrap and a topic");
  }
  std::unique_ptr<BenchConsumer> self(new BenchConsumer());
  self->group_ = options.group.empty() ? absl::StrCat(options.client_id, "-", WallMicros())
                                       : options.group;
  self->rebalance_ = std::make_unique<Rebalance>(options.ready_file);
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", options.bootstrap}, {"group.id", self->group_},
      {"client.id", options.client_id},         {"auto.offset.reset", "earliest"},
      {"enable.auto.commit", "false"},          {"enable.auto.offset.store", "false"},
      {"enable.partition.eof", "false"},
  };
  for (const std::string& property : options.extra) {
    const size_t eq = property.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("not name=value: ", property));
    }
    settings.emplace_back(property.substr(0, eq), property.substr(eq + 1));
  }
  std::string errstr;
  for (const auto& [name, value] : settings) {
    if (conf->set(name, value, errstr) != RdKafka::Conf::CONF_OK) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", errstr));
    }
  }
  if (conf->set("rebalance_cb", self->rebalance_.get(), errstr) != RdKafka::Conf::CONF_OK) {
    return absl::InternalError(absl::StrCat("rebalance_cb: ", errstr));
  }
  self->consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (self->consumer_ == nullptr) return absl::InternalError(errstr);
  if (self->consumer_->subscribe({options.topic}) != RdKafka::ERR_NO_ERROR) {
    return absl::InternalError(absl::StrCat("subscribe to ", options.topic, " failed"));
  }
  return self;
}

BenchConsumer::~BenchConsumer() {
  // close() leaves the group while the rebalance callback still exists.
  if (consumer_ != nullptr) consumer_->close();
}

}  // namespace ferry::bench
