// Decoder: turns a RawRecord into a ferry.v1.Event, taking the event's key and
// type from the sources each topic configures (record key, header, JSON field
// of the payload, topic name, constant).
//
// A record whose configured field cannot be found or parsed is poison: Decode
// returns InvalidArgument naming the topic/partition/offset and what is
// missing, and the caller fails it by policy (it never stalls the partition).
// Every proto3 string of the Event is valid UTF-8, so no worker must reject
// it: a type or topic that is not is poison; a header name that is not is
// carried as core/kafka/event_header.h describes (sanitised key + raw_key).
//
// Threading: immutable after Create(); Decode is safe from any thread.
#ifndef FERRY_CORE_KAFKA_DECODER_H_
#define FERRY_CORE_KAFKA_DECODER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/config.h"
#include "core/kafka/record.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

class Decoder {
 public:
  // Fails (InvalidArgument) on a topic configured twice or an invalid JSON
  // pointer.
  static absl::StatusOr<std::unique_ptr<Decoder>> Create(
      const std::vector<TopicConfig>& topics);

  // Fills topic, partition, offset, key, type, payload, headers and
  // timestamp_ms. Leaves id, attempt and deadline_ms for the dispatcher.
  // Records of a topic not in the config are decoded with the defaults
  // (record key, type = topic name).
  absl::StatusOr<v1::Event> Decode(const RawRecord& record) const;
  // The same, moving topic, payload and headers out of `record` instead of
  // copying them (the consumer's per-record path). On an error `record` is
  // left whole, for the dead-letter record.
  absl::StatusOr<v1::Event> Decode(RawRecord&& record) const;
  // The consumer's per-record path: decodes into `*event` (cleared first; a
  // caller's reused Event keeps its string buffers), with no Event temporary
  // in between. Topic and payload are swapped with the event's cleared
  // strings, so `record` leaves with them empty but holding the event's old
  // buffers, which the next record is read into without allocating; headers
  // are moved out. On an error `record` is left whole and `*event` is
  // unspecified.
  absl::Status DecodeInto(RawRecord& record, v1::Event* event) const;

 private:
  absl::Status KeyAndType(const RawRecord& record, std::string* key, std::string* type) const;
  explicit Decoder(const std::map<std::string, TopicConfig>& topics);
  struct Topic {
    TopicConfig config;
    // Whether the name is valid UTF-8, found once here rather than per record.
    bool name_is_utf8 = false;
  };
  std::map<std::string, Topic> topics_;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_DECODER_H_
