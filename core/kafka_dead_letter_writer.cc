#include "core/kafka_dead_letter_writer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/kafka_status.h"
#include "core/log.h"

namespace ferry {

class KafkaDeadLetterWriter::DeliveryHandler final : public RdKafka::DeliveryReportCb {
 public:
  explicit DeliveryHandler(KafkaDeadLetterWriter* owner) : owner_(owner) {}
  void dr_cb(RdKafka::Message& message) override { owner_->OnDelivery(message); }

 private:
  KafkaDeadLetterWriter* const owner_;
};

KafkaDeadLetterWriter::KafkaDeadLetterWriter(std::string instance)
    : instance_(std::move(instance)),
      delivery_handler_(std::make_unique<DeliveryHandler>(this)) {}

absl::StatusOr<std::unique_ptr<KafkaDeadLetterWriter>> KafkaDeadLetterWriter::Create(
    const std::map<std::string, std::string>& kafka, std::string instance) {
  auto self = std::unique_ptr<KafkaDeadLetterWriter>(
      new KafkaDeadLetterWriter(std::move(instance)));
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string error;
  std::map<std::string, std::string> properties;
  for (const auto& [name, value] : kafka) {
    if (!IsConsumerOnlyProperty(name)) properties[name] = value;
  }
  // No loss: every write acknowledged by all in-sync replicas, no duplicates
  // from retries; librdkafka retries until message.timeout.ms.
  properties["acks"] = "all";
  properties["enable.idempotence"] = "true";
  properties["linger.ms"] = "5";
  for (const auto& [name, value] : properties) {
    if (conf->set(name, value, error) != RdKafka::Conf::CONF_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("kafka.", name, ": the dead-letter producer rejected \"", value,
                       "\": ", error));
    }
  }
  if (conf->set("dr_cb", self->delivery_handler_.get(), error) != RdKafka::Conf::CONF_OK) {
    return absl::InternalError(error);
  }
  self->producer_.reset(RdKafka::Producer::create(conf.get(), error));
  if (self->producer_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the dead-letter producer: ", error));
  }
  return self;
}

KafkaDeadLetterWriter::~KafkaDeadLetterWriter() { Stop(absl::ZeroDuration()); }

void KafkaDeadLetterWriter::Start() {
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void KafkaDeadLetterWriter::Stop(absl::Duration flush) {
  if (stopped_) return;
  stopped_ = true;
  if (producer_ != nullptr && flush > absl::ZeroDuration()) {
    producer_->flush(static_cast<int>(absl::ToInt64Milliseconds(flush)));
  }
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (producer_ != nullptr) {
    // Outstanding writes fail now (their delivery reports fire in poll).
    producer_->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
    producer_->poll(0);
  }
  std::deque<std::pair<Done, absl::Status>> failed;
  {
    absl::MutexLock lock(&mu_);
    failed.swap(failed_);
  }
  for (auto& [done, status] : failed) done(status);
}

void KafkaDeadLetterWriter::Write(DeadLetter letter, Done done) {
  auto pending = std::make_unique<Pending>();
  pending->letter = std::move(letter);
  pending->done = std::move(done);
  Produce(std::move(pending), /*drop_payload=*/false);
}

void KafkaDeadLetterWriter::Produce(std::unique_ptr<Pending> pending, bool drop_payload) {
  const DeadLetter& letter = pending->letter;
  RdKafka::Headers* headers = RdKafka::Headers::create();
  for (const auto& [name, value] : letter.headers) headers->add(name, value);
  headers->add(kHeaderSourceTopic, letter.source_topic);
  headers->add(kHeaderSourcePartition, absl::StrCat(letter.source_partition));
  headers->add(kHeaderSourceOffset, absl::StrCat(letter.source_offset));
  headers->add(kHeaderError, letter.error);
  headers->add(kHeaderAttempts, absl::StrCat(letter.attempts));
  if (!letter.processor.empty()) headers->add(kHeaderProcessor, letter.processor);
  headers->add(kHeaderInstance, instance_);
  if (drop_payload) headers->add(kHeaderPayloadDropped, "true");

  const std::string topic = letter.dead_letter_topic;
  const int64_t timestamp_ms = letter.timestamp_ms;
  // An emptied payload marks the letter as "already sent without payload".
  if (drop_payload) pending->letter.payload.clear();
  void* key = letter.key ? const_cast<char*>(letter.key->data()) : nullptr;
  const size_t key_size = letter.key ? letter.key->size() : 0;
  void* payload = drop_payload ? nullptr : const_cast<char*>(letter.payload.data());
  const size_t payload_size = drop_payload ? 0 : letter.payload.size();
  // RK_MSG_COPY copies the bytes during the call. Once it succeeds the
  // delivery report owns `raw` (and may run at once on the poll thread), so
  // nothing below touches it unless produce failed.
  Pending* raw = pending.release();
  const RdKafka::ErrorCode code = producer_->produce(
      topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY, payload, payload_size,
      key, key_size, timestamp_ms, headers, raw);
  if (code != RdKafka::ERR_NO_ERROR) {
    delete headers;  // not taken over on failure
    std::unique_ptr<Pending> failed(raw);
    absl::MutexLock lock(&mu_);
    failed_.emplace_back(std::move(failed->done),
                         KafkaErrorToStatus(code, absl::StrCat("dead letter to ", topic)));
  }
}

void KafkaDeadLetterWriter::OnDelivery(RdKafka::Message& message) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(message.msg_opaque()));
  if (pending == nullptr) return;
  if (message.err() == RdKafka::ERR_MSG_SIZE_TOO_LARGE && !pending->letter.payload.empty()) {
    LogWarn("dead-letter", "record from ", pending->letter.source_topic, "/",
            pending->letter.source_partition, "@", pending->letter.source_offset,
            " is too big for ", pending->letter.dead_letter_topic,
            "; writing it without its payload");
    Produce(std::move(pending), /*drop_payload=*/true);
    return;
  }
  pending->done(KafkaErrorToStatus(
      message.err(), absl::StrCat("dead letter to ", pending->letter.dead_letter_topic)));
}

void KafkaDeadLetterWriter::Run() {
  while (!stop_) {
    producer_->poll(50);
    std::deque<std::pair<Done, absl::Status>> failed;
    {
      absl::MutexLock lock(&mu_);
      failed.swap(failed_);
    }
    for (auto& [done, status] : failed) done(status);
  }
}

}  // namespace ferry
