// KafkaDeadLetterWriter: writes dead letters to Kafka with a producer set for
// no loss (acks=all, idempotence on), and reports each write's outcome from
// its delivery report.
//
// A record too big for the dead-letter topic is written again without its
// payload (header ferry.payload.dropped=true) rather than blocking forever.
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
#include "core/dead_letter.h"

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
  struct Pending {
    DeadLetter letter;
    Done done;
  };

  KafkaDeadLetterWriter(std::string instance);
  // Produces; on a local error queues the failure for the poll thread.
  void Produce(std::unique_ptr<Pending> pending, bool drop_payload);
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
