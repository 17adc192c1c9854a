// KafkaDeadLetterWriter: writes dead letters to Kafka with a producer set for
// no loss (acks=all, idempotence on), and reports each write's outcome from
// its delivery report.
//
// A letter too big for the dead-letter topic (the producer's
// message.max.bytes, checked when producing, or the topic's max.message.bytes,
// reported by the broker) is written again without its payload (headers
// ferry.payload.dropped=true and ferry.dropped.reason), and if that is still
// too big, also without its key and original headers (ferry.key.dropped,
// ferry.headers.dropped) and with ferry.error cut to 256 bytes, rather than
// blocking its partition. Only when even that letter is too big is the write
// reported failed (the engine retries it: the topic's limit must be raised).
// Other errors are reported as they are (transient ones are retried).
//
// Threading: Write from any thread (never calls `done` inline); one internal
// thread serves delivery reports. Stop flushes (bounded) and joins.
#ifndef FERRY_CORE_KAFKA_DEAD_LETTER_WRITER_H_
#define FERRY_CORE_KAFKA_DEAD_LETTER_WRITER_H_

#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/dead_letter.h"

namespace ferry {

class KafkaDeadLetterWriter final : public DeadLetterWriter {
 public:
  // `kafka` is the config's `kafka:` map (consumer-only properties are
  // dropped); `instance` names this ferry process in the headers.
  static absl::StatusOr<std::unique_ptr<KafkaDeadLetterWriter>> Create(
      const std::map<std::string, std::string>& kafka, std::string instance);
  ~KafkaDeadLetterWriter() override;

  void Start();
  // Waits up to `flush` for outstanding writes, then stops. Writes not
  // acknowledged by then report Unavailable (their offsets stay uncommitted).
  void Stop(absl::Duration flush = absl::Seconds(5));

  void Write(DeadLetter letter, Done done) override;

 private:
  class DeliveryHandler;
  // How much of the record a letter still carries.
  enum class Stage { kFull, kNoPayload, kBare };
  struct Pending {
    DeadLetter letter;
    Done done;
    Stage stage = Stage::kFull;
    std::string drop_reason;  // why the payload was dropped (not kFull)
    size_t payload_bytes = 0;  // the dropped payload's size (not kFull)
  };

  KafkaDeadLetterWriter(std::string instance);
  // Produces; on a local error queues the failure for the poll thread.
  void Produce(std::unique_ptr<Pending> pending);
  RdKafka::Headers* HeadersFor(const Pending& pending) const;
  // After MSG_SIZE_TOO_LARGE (`why`: whose limit): moves to the next smaller
  // stage; false when there is none.
  bool ShrinkAfterTooLarge(Pending& pending, const char* why);
  void OnDelivery(RdKafka::Message& message);
  void Run();

  const std::string instance_;
  std::unique_ptr<DeliveryHandler> delivery_handler_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
  bool stopped_ = false;
  absl::Mutex mu_;
  // Failures found while producing, reported from the poll thread.
  std::deque<std::pair<Done, absl::Status>> failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_DEAD_LETTER_WRITER_H_
