// Event headers: how a Kafka record header (name and value are both raw
// bytes) is carried in a ferry.v1.Header, whose `key` is a proto3 `string`
// that every conforming worker must reject unless it is valid UTF-8.
//
// A valid UTF-8 name travels unchanged in `key`. Any other name travels as
// `key` = the name with each byte that is not part of a valid UTF-8 sequence
// replaced by U+FFFD, plus `raw_key` = the original bytes, so the event is
// still delivered and nothing is lost. OriginalName undoes this (the
// dead-letter record carries the original header).
//
// UTF-8 validity is core/common/utf8.h's (protobuf's own rule).
//
// Threading: stateless functions, safe from any thread.
#ifndef FERRY_CORE_KAFKA_EVENT_HEADER_H_
#define FERRY_CORE_KAFKA_EVENT_HEADER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

// Appends a header named `name` with `value` to `event` (see above).
void AddEventHeader(v1::Event* event, std::string name, std::string value);

// The record header's name as it was in Kafka: raw_key when set, else key.
const std::string& OriginalName(const v1::Header& header);

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_EVENT_HEADER_H_
