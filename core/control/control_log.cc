#include "core/control/control_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"

namespace ferry {
namespace {

using v1::internal::CommandResult;
using v1::internal::ControlLogRecord;

// One produce's outcome, shared by Append (which may give up waiting) and
// the delivery callback (which may come later).
struct Delivery {
  absl::Notification done;
  RdKafka::ErrorCode error = RdKafka::ERR_NO_ERROR;
  int64_t offset = -1;
};

class DeliveryHandler final : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    auto* delivery = static_cast<std::shared_ptr<Delivery>*>(message.msg_opaque());
    if (delivery == nullptr) return;
    (*delivery)->error = message.err();
    (*delivery)->offset = message.offset();
    (*delivery)->done.Notify();
    delete delivery;
  }
};

DeliveryHandler& SharedDeliveryHandler() {
  static DeliveryHandler* handler = new DeliveryHandler();
  return *handler;
}

}  // namespace

ControlLog::ControlLog(std::string topic, std::string replica)
    : topic_(std::move(topic)), replica_(std::move(replica)) {}

absl::StatusOr<std::unique_ptr<ControlLog>> ControlLog::Create(const Config& config,
                                                               std::string replica) {
  auto self = std::unique_ptr<ControlLog>(new ControlLog(config.control_topic, std::move(replica)));
  std::string error;
  auto make_conf = [&](bool producer) -> absl::StatusOr<std::unique_ptr<RdKafka::Conf>> {
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::map<std::string, std::string> properties;
    for (const auto& [name, value] : config.kafka) {
      if (producer && IsConsumerOnlyProperty(name)) continue;
      if (!producer && (name == "group.id" || name == "group.instance.id" ||
                        name == "partition.assignment.strategy")) {
        continue;  // the reader is no group member
      }
      properties[name] = value;
    }
    if (producer) {
      // A command is acknowledged only when every in-sync replica has it.
      properties["acks"] = "all";
      properties["enable.idempotence"] = "true";
      properties["linger.ms"] = "0";
    } else {
      properties["enable.partition.eof"] = "true";
      properties["enable.auto.commit"] = "false";
      properties["enable.auto.offset.store"] = "false";
      properties["fetch.wait.max.ms"] = "50";
    }
    for (const auto& [name, value] : properties) {
      absl::Status set = KafkaConfResultToStatus(
          conf->set(name, value, error), error,
          absl::StrCat("kafka.", name, " (control-topic client)"), value);
      if (!set.ok()) return set;
    }
    if (producer && conf->set("dr_cb", &SharedDeliveryHandler(), error) != RdKafka::Conf::CONF_OK) {
      return absl::InternalError(error);
    }
    return conf;
  };
  absl::StatusOr<std::unique_ptr<RdKafka::Conf>> producer_conf = make_conf(true);
  if (!producer_conf.ok()) return producer_conf.status();
  self->producer_.reset(RdKafka::Producer::create(producer_conf->get(), error));
  if (self->producer_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("control topic producer: ", error));
  }
  absl::StatusOr<std::unique_ptr<RdKafka::Conf>> reader_conf = make_conf(false);
  if (!reader_conf.ok()) return reader_conf.status();
  self->reader_.reset(RdKafka::Consumer::create(reader_conf->get(), error));
  if (self->reader_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("control topic reader: ", error));
  }
  absl::StatusOr<std::unique_ptr<KafkaAdmin>> admin =
      KafkaAdmin::Create(config.kafka, "control topic");
  if (!admin.ok()) return admin.status();
  self->admin_ = *std::move(admin);
  self->reader_topic_.reset(
      RdKafka::Topic::create(self->reader_.get(), self->topic_, nullptr, error));
  if (self->reader_topic_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("control topic ", self->topic_, ": ", error));
  }
  return self;
}

ControlLog::~ControlLog() { Stop(); }

absl::Status ControlLog::EnsureTopic() {
  // Look first, listing all topics: asking for this one by name would let
  // the broker auto-create it with its defaults.
  absl::StatusOr<TopicDescription> existing = admin_->DescribeTopic(topic_, absl::Seconds(10));
  if (existing.ok() && existing->status.ok()) return absl::OkStatus();
  if (!existing.ok() && !absl::IsNotFound(existing.status())) return existing.status();
  // CreateTopics goes to the controller. librdkafka's mock cluster (the
  // embedded default, tests) names a controller that is none of its
  // brokers and would leave the request waiting for its whole timeout.
  absl::StatusOr<bool> controller = admin_->ControllerIsABroker(absl::Seconds(5));
  if (!controller.ok() || !*controller) {
    return AutoCreateTopic(controller.ok() ? "no controller among the brokers"
                                           : std::string(controller.status().message()));
  }
  // One partition keeps one order of commands; replication by the broker's
  // default. No retention limit: the log is the pause state.
  absl::Status created = admin_->CreateTopic(
      TopicSpec{topic_, 1, -1, {{"retention.ms", "-1"}, {"cleanup.policy", "delete"}}},
      absl::Seconds(10));
  if (created.ok() || absl::IsAlreadyExists(created)) return absl::OkStatus();
  return AutoCreateTopic(absl::StrCat(created.message(),
                                      " (create it with one partition, or set control.topic to "
                                      "one that exists)"));
}

absl::Status ControlLog::AutoCreateTopic(const std::string& why) {
  // No CreateTopics (librdkafka's mock cluster has no controller, or the
  // principal may not create topics): asking for the topic by name lets a
  // broker that allows it auto-create the topic with its defaults. Only
  // partition 0 is used, so more partitions do no harm.
  absl::StatusOr<int32_t> partitions = admin_->PartitionCountByName(topic_, absl::Seconds(10));
  for (int attempt = 0; attempt < 20 && !partitions.ok(); ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));  // auto-creation takes a moment
    partitions = admin_->PartitionCountByName(topic_, absl::Seconds(10));
  }
  if (!partitions.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create control topic ", topic_, " (", why, ") nor have it auto-created (",
        partitions.status().message(),
        "); create it with one partition and retention.ms=-1, or set control.topic"));
  }
  LogWarn("control", "control topic ", topic_, " was auto-created with the broker's defaults (",
          why, "); on a real cluster create it with one partition and retention.ms=-1 so "
          "pauses are kept");
  return absl::OkStatus();
}

absl::Status ControlLog::Start() {
  started_ = true;
  thread_ = std::thread([this] { ReadLoop(); });
  return absl::OkStatus();
}

bool ControlLog::OpenForReading() {
  absl::Status created = EnsureTopic();
  RdKafka::ErrorCode err = RdKafka::ERR_NO_ERROR;
  if (created.ok()) {
    err = reader_->start(reader_topic_.get(), 0, RdKafka::Topic::OFFSET_BEGINNING);
    if (err == RdKafka::ERR_NO_ERROR) {
      reading_ = true;
      LogInfo("control", "reading control topic ", topic_, " as ", replica_);
      return true;
    }
    created = KafkaErrorToStatus(err, absl::StrCat("reading control topic ", topic_));
  }
  LogWarn("control", "control topic not available yet (", created.ToString(),
          "); operator commands wait for it; retrying");
  return false;
}
void ControlLog::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (reading_) reader_->stop(reader_topic_.get(), 0);
  if (producer_ != nullptr) producer_->flush(2000);
}

void ControlLog::ReadLoop() {
  int64_t last_error_log = 0;
  // Kafka may not be reachable yet: keep trying (every 2 s) rather than keep
  // ferry from starting.
  while (!stop_.load() && !OpenForReading()) {
    for (int i = 0; i < 20 && !stop_.load(); ++i) {
      absl::SleepFor(absl::Milliseconds(100));  // retry pacing, stoppable
    }
  }
  while (!stop_.load()) {
    std::unique_ptr<RdKafka::Message> message(reader_->consume(reader_topic_.get(), 0, 100));
    if (message == nullptr) continue;
    switch (message->err()) {
      case RdKafka::ERR_NO_ERROR:
        Fold(*message);
        break;
      case RdKafka::ERR__PARTITION_EOF: {
        absl::MutexLock lock(&mu_);
        read_position_ = std::max(read_position_, message->offset());
        break;
      }
      case RdKafka::ERR__TIMED_OUT:
        break;
      default: {
        const int64_t now = absl::ToUnixSeconds(absl::Now());
        if (now - last_error_log >= 10) {
          last_error_log = now;
          LogWarn("control", "reading control topic ", topic_, ": ", message->errstr());
        }
        break;
      }
    }
  }
}

void ControlLog::Fold(RdKafka::Message& message) {
  ControlLogRecord record;
  const bool parsed = record.ParseFromArray(message.payload(), static_cast<int>(message.len()));
  absl::MutexLock lock(&mu_);
  if (!parsed) {
    LogWarn("control", "ignoring unreadable record at ", topic_, "@", message.offset(),
            " (not written by ferry?)");
  } else if (!state_.Apply(record)) {
    LogWarn("control", "ignoring a control record of an unknown kind (from a newer ferry?)");
  } else {
    ++generation_;
  }
  read_position_ = std::max(read_position_, message.offset() + 1);
}

absl::StatusOr<int32_t> ControlLog::PartitionCount(const std::string& topic,
                                                   absl::Duration timeout) {
  return admin_->PartitionCountByName(topic, timeout);
}

absl::StatusOr<std::pair<int64_t, int64_t>> ControlLog::Watermarks(const TopicPartition& partition,
                                                                   absl::Duration timeout) {
  return admin_->Watermarks(partition.topic, partition.partition, timeout);
}

absl::StatusOr<int64_t> ControlLog::OffsetForTimestamp(const TopicPartition& partition,
                                                       int64_t timestamp_ms,
                                                       absl::Duration timeout) {
  absl::StatusOr<std::map<int32_t, int64_t>> offsets =
      admin_->OffsetsForTimestamp(partition.topic, {partition.partition}, timestamp_ms, timeout);
  if (!offsets.ok()) return offsets.status();
  auto it = offsets->find(partition.partition);
  if (it == offsets->end()) {
    return absl::InternalError(absl::StrCat("no offset for time in ", partition.ToString()));
  }
  return it->second;
}

std::string ControlLog::NewCommandId() {
  return absl::StrCat(replica_, "-", absl::ToUnixMicros(absl::Now()), "-", next_command_++);
}

absl::StatusOr<int64_t> ControlLog::Append(ControlLogRecord record, absl::Duration timeout) {
  std::vector<ControlLogRecord> records;
  records.push_back(std::move(record));
  return AppendAll(std::move(records), timeout);
}

absl::StatusOr<int64_t> ControlLog::AppendAll(std::vector<ControlLogRecord> records,
                                              absl::Duration timeout) {
  std::vector<std::shared_ptr<Delivery>> deliveries;
  for (ControlLogRecord& record : records) {
    if (record.command_id().empty()) record.set_command_id(NewCommandId());
    if (record.issued_by().empty()) record.set_issued_by(replica_);
    if (record.issued_at_ms() == 0) record.set_issued_at_ms(absl::ToUnixMillis(absl::Now()));
    const std::string value = record.SerializeAsString();
    auto delivery = std::make_shared<Delivery>();
    auto* opaque = new std::shared_ptr<Delivery>(delivery);
    const RdKafka::ErrorCode err = producer_->produce(
        topic_, 0, RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()), value.size(),
        record.command_id().data(), record.command_id().size(), 0, opaque);
    if (err != RdKafka::ERR_NO_ERROR) {
      delete opaque;
      return KafkaErrorToStatus(err, absl::StrCat("writing to control topic ", topic_));
    }
    deliveries.push_back(std::move(delivery));
  }
  const absl::Time deadline = absl::Now() + timeout;
  int64_t last_offset = -1;
  for (const std::shared_ptr<Delivery>& delivery : deliveries) {
    while (!delivery->done.HasBeenNotified() && absl::Now() < deadline) producer_->poll(20);
    if (!delivery->done.HasBeenNotified()) {
      return absl::UnavailableError(absl::StrCat("control topic ", topic_,
                                                 ": no acknowledgement within ",
                                                 absl::FormatDuration(timeout), "; retry"));
    }
    if (delivery->error != RdKafka::ERR_NO_ERROR) {
      return KafkaErrorToStatus(delivery->error,
                                absl::StrCat("writing to control topic ", topic_));
    }
    last_offset = std::max(last_offset, delivery->offset);
  }
  return last_offset;
}

absl::Status ControlLog::ReportResults(std::vector<CommandResult> results) {
  if (results.empty()) return absl::OkStatus();
  std::vector<ControlLogRecord> records;
  {
    absl::MutexLock lock(&mu_);
    for (CommandResult& result : results) {
      state_.MarkAnswered(result.command_id(), TopicPartition{result.topic(), result.partition()});
      ControlLogRecord record;
      *record.mutable_result() = std::move(result);
      records.push_back(std::move(record));
    }
  }
  absl::StatusOr<int64_t> offset = AppendAll(std::move(records), absl::Seconds(30));
  ++generation_;
  return offset.status();
}

absl::Status ControlLog::ReportResult(CommandResult result) {
  std::vector<CommandResult> results;
  results.push_back(std::move(result));
  return ReportResults(std::move(results));
}

absl::Status ControlLog::WaitRead(int64_t offset, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto caught_up = [this, offset]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return read_position_ >= offset;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&caught_up), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("control topic ", topic_, " read up to ",
                                                    read_position_, ", not yet to ", offset));
  }
  return absl::OkStatus();
}

absl::Status ControlLog::CatchUp(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::pair<int64_t, int64_t>> marks = admin_->Watermarks(topic_, 0, timeout);
  if (!marks.ok()) {
    return absl::Status(marks.status().code(),
                        absl::StrCat("end of control topic: ", marks.status().message()));
  }
  return WaitRead(marks->second, std::max(deadline - absl::Now(), absl::ZeroDuration()));
}

std::set<TopicPartition> ControlLog::Paused(const std::vector<TopicPartition>& among) const {
  absl::MutexLock lock(&mu_);
  return state_.Paused(among);
}

std::vector<std::string> ControlLog::PauseCommands() const {
  absl::MutexLock lock(&mu_);
  return state_.PauseCommands();
}

std::map<std::string, RateLimitConfig> ControlLog::RateLimits() const {
  absl::MutexLock lock(&mu_);
  return state_.RateLimits();
}

std::vector<ControlLog::PendingReset> ControlLog::PendingResets(
    const std::vector<TopicPartition>& owned) const {
  absl::MutexLock lock(&mu_);
  return state_.PendingResets(owned);
}

std::vector<ControlLog::PendingSkip> ControlLog::PendingSkips(
    const std::vector<TopicPartition>& owned) const {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  return state_.PendingSkips(owned, now_ms);
}

std::vector<ControlLog::PendingAck> ControlLog::PendingPauseAcks(
    const std::vector<TopicPartition>& owned) const {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  return state_.PendingPauseAcks(owned, now_ms);
}

std::vector<ControlLog::AppliedResult> ControlLog::WaitForResults(const std::string& command_id,
                                                                  size_t expected,
                                                                  absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, &command_id, expected]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_.ResultCount(command_id) >= expected;
  };
  mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  return state_.Results(command_id);
}

}  // namespace ferry
