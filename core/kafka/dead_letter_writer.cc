#include "core/kafka/dead_letter_writer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"

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
  Produce(std::move(pending));
}

namespace {

// ferry.error is cut to this in a bare letter: the error text (a worker's
// FAIL message among them) must not be what keeps the letter too big.
constexpr size_t kBareErrorBytes = 256;

}  // namespace

RdKafka::Headers* KafkaDeadLetterWriter::HeadersFor(const Pending& pending) const {
  const DeadLetter& letter = pending.letter;
  const bool bare = pending.stage == Stage::kBare;
  RdKafka::Headers* headers = RdKafka::Headers::create();
  if (!bare) {
    for (const auto& [name, value] : letter.headers) headers->add(name, value);
  }
  headers->add(kHeaderSourceTopic, letter.source_topic);
  headers->add(kHeaderSourcePartition, absl::StrCat(letter.source_partition));
  headers->add(kHeaderSourceOffset, absl::StrCat(letter.source_offset));
  headers->add(kHeaderError, bare && letter.error.size() > kBareErrorBytes
                                 ? letter.error.substr(0, kBareErrorBytes)
                                 : letter.error);
  headers->add(kHeaderAttempts, absl::StrCat(letter.attempts));
  headers->add(kHeaderProcessor, letter.processor);  // on every dead letter, maybe empty
  headers->add(kHeaderInstance, instance_);
  if (pending.stage != Stage::kFull) {
    headers->add(kHeaderPayloadDropped, "true");
    headers->add(kHeaderDroppedReason, pending.drop_reason);
  }
  if (bare) {
    headers->add(kHeaderKeyDropped, "true");
    headers->add(kHeaderHeadersDropped, "true");
  }
  return headers;
}

void KafkaDeadLetterWriter::Produce(std::unique_ptr<Pending> pending) {
  // Too big is permanent for one letter, so each stage drops more (payload;
  // then key, the original headers and most of the error) rather than
  // retrying what cannot succeed. Synchronous errors (the letter is over the
  // producer's message.max.bytes) take this loop; the broker's own limit
  // comes back in a delivery report, which calls Produce again.
  for (;;) {
    const DeadLetter& letter = pending->letter;
    const bool keep_payload = pending->stage == Stage::kFull;
    const bool keep_key = pending->stage != Stage::kBare && letter.key.has_value();
    RdKafka::Headers* headers = HeadersFor(*pending);
    const std::string topic = letter.dead_letter_topic;
    void* key = keep_key ? const_cast<char*>(letter.key->data()) : nullptr;
    const size_t key_size = keep_key ? letter.key->size() : 0;
    void* payload = keep_payload ? const_cast<char*>(letter.payload.data()) : nullptr;
    const size_t payload_size = keep_payload ? letter.payload.size() : 0;
    // RK_MSG_COPY copies the bytes during the call. Once it succeeds the
    // delivery report owns `raw` (and may run at once on the poll thread),
    // so nothing below touches it unless produce failed.
    Pending* raw = pending.release();
    const RdKafka::ErrorCode code = producer_->produce(
        topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY, payload,
        payload_size, key, key_size, letter.timestamp_ms, headers, raw);
    if (code == RdKafka::ERR_NO_ERROR) return;
    delete headers;  // not taken over on failure
    pending.reset(raw);
    if (code == RdKafka::ERR_MSG_SIZE_TOO_LARGE &&
        ShrinkAfterTooLarge(*pending, "the producer's message.max.bytes")) {
      continue;
    }
    absl::MutexLock lock(&mu_);
    failed_.emplace_back(std::move(pending->done),
                         KafkaErrorToStatus(code, absl::StrCat("dead letter to ", topic)));
    return;
  }
}

bool KafkaDeadLetterWriter::ShrinkAfterTooLarge(Pending& pending, const char* why) {
  if (pending.stage == Stage::kBare) return false;
  DeadLetter& letter = pending.letter;
  if (pending.stage == Stage::kFull) {
    pending.stage = Stage::kNoPayload;
    pending.payload_bytes = letter.payload.size();
    std::string().swap(letter.payload);  // not sent again: free it now
    pending.drop_reason = absl::StrCat("too large: with its ", pending.payload_bytes,
                                       "-byte payload the letter is over ", why);
  } else {
    pending.stage = Stage::kBare;
    size_t header_bytes = 0;
    for (const auto& [name, value] : letter.headers) header_bytes += name.size() + value.size();
    pending.drop_reason = absl::StrCat(
        "too large: even without its ", pending.payload_bytes, "-byte payload (key ",
        letter.key ? letter.key->size() : 0, " bytes, ", letter.headers.size(), " headers of ",
        header_bytes, " bytes, error ", letter.error.size(), " bytes) the letter is over ", why);
  }
  LogWarn("dead-letter", "record from ", letter.source_topic, "/", letter.source_partition, "@",
          letter.source_offset, " is too big for ", letter.dead_letter_topic, "; writing it ",
          pending.stage == Stage::kNoPayload ? "without its payload"
                                             : "without its payload, key and headers");
  return true;
}

void KafkaDeadLetterWriter::OnDelivery(RdKafka::Message& message) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(message.msg_opaque()));
  if (pending == nullptr) return;
  if (message.err() == RdKafka::ERR_MSG_SIZE_TOO_LARGE &&
      ShrinkAfterTooLarge(*pending, "the broker's limit for the topic")) {
    Produce(std::move(pending));
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
