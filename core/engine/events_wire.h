// Events wire framing: building an Events message's wire bytes straight from
// the engine's events (core/engine/worker_stream.h, EventsWire), and the one
// definition of the field header both the engine and the worker pool write
// (v1::Events.events and v1::ProcessRequest.events are both field 1,
// length-delimited).
//
// Threading: pure functions.
#ifndef FERRY_CORE_ENGINE_EVENTS_WIRE_H_
#define FERRY_CORE_ENGINE_EVENTS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/engine/worker_stream.h"
#include "ferry/v1/processor.pb.h"
#include "google/protobuf/io/coded_stream.h"

namespace ferry {

// The tag of field 1 with wire type 2 (length-delimited): (1 << 3) | 2.
inline constexpr uint8_t kField1LengthDelimitedTag = (1 << 3) | 2;
static_assert(v1::Events::kEventsFieldNumber == 1, "Events.events is field 1");
static_assert(v1::ProcessRequest::kEventsFieldNumber == 1, "ProcessRequest.events is field 1");

// The most a field-1 header adds: the tag and a varint length of at most 10
// bytes.
inline constexpr int64_t kEventFraming = 1 + 10;

// Writes the header of a field-1 length-delimited value of `size` bytes at
// `target` (room for kEventFraming bytes) and returns the end of it.
inline uint8_t* WriteField1Header(size_t size, uint8_t* target) {
  *target++ = kField1LengthDelimitedTag;
  return google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(size, target);
}

// Appends `event` (whose ByteSizeLong() is `size`) to an Events message's
// wire bytes: the serialization gRPC would otherwise do on a copy.
inline void AppendEventWire(const v1::Event& event, size_t size, EventsWire* wire) {
  using google::protobuf::io::CodedOutputStream;
  std::string& out = wire->bytes;
  if (out.empty()) out.reserve((size + kEventFraming) * 16);
  const size_t at = out.size();
  const size_t header = 1 + CodedOutputStream::VarintSize64(size);
  out.resize(at + header + size);
  auto* target = reinterpret_cast<uint8_t*>(&out[at]);
  target = WriteField1Header(size, target);
  event.SerializeWithCachedSizesToArray(target);
  ++wire->count;
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENTS_WIRE_H_
