// RawRecord: a Kafka record copied out of librdkafka, the input of the Decoder.
//
// Keeping the decoder's input a plain struct (not an RdKafka::Message) lets
// tests build records by hand and keeps librdkafka inside the consumer adapter.
#ifndef FERRY_CORE_KAFKA_RECORD_H_
#define FERRY_CORE_KAFKA_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry {

struct RawRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;  // nullopt: the record has a null key
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = 0;

  // Approximate memory held by this record, for the byte budget.
  int64_t ByteSize() const;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_RECORD_H_
