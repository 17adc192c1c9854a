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

// The bytes the fields a delivery stamps take on the wire: id, attempt,
// deadline_ms and run_id (fields 1, 10, 11, 12: one-byte tags; proto3 leaves
// a zero out). Everything else in an Event is fixed once it is submitted, so
// its size is measured once (UnstampedWireSize) and this is added per
// delivery instead of a ByteSizeLong over the whole event.
inline size_t StampedFieldsSize(const v1::Event& event) {
  using google::protobuf::io::CodedOutputStream;
  static_assert(v1::Event::kIdFieldNumber < 16 && v1::Event::kRunIdFieldNumber < 16,
                "one-byte tags");
  size_t size = 0;
  if (event.id() != 0) size += 1 + CodedOutputStream::VarintSize64(event.id());
  if (event.attempt() != 0) {
    size += 1 + CodedOutputStream::VarintSize32SignExtended(event.attempt());
  }
  if (event.deadline_ms() != 0) {
    size += 1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(event.deadline_ms()));
  }
  if (event.run_id() != 0) size += 1 + CodedOutputStream::VarintSize64(event.run_id());
  return size;
}

// The most the stamped fields can take: four varints of at most 10 bytes
// with their tags.
inline constexpr int64_t kMaxStampedFieldsSize = 4 * 11;

// Measures `event` once (ByteSizeLong, which also caches its headers' sizes
// for SerializeWithCachedSizesToArray) and returns its size without the
// stamped fields. Valid while nothing but the stamped fields changes.
inline int64_t UnstampedWireSize(const v1::Event& event) {
  return static_cast<int64_t>(event.ByteSizeLong() - StampedFieldsSize(event));
}

// The wire size of a stamped `event` whose UnstampedWireSize was
// `unstamped` (-1: not measured, so measured now).
inline size_t DeliveredSize(const v1::Event& event, int64_t unstamped) {
  if (unstamped < 0) return event.ByteSizeLong();
  return static_cast<size_t>(unstamped) + StampedFieldsSize(event);
}

// Appends `event`, whose wire size is `size` (DeliveredSize or
// ByteSizeLong), to an Events message's wire bytes: the serialization gRPC
// would otherwise do on a copy. Writes through a bounded stream, so a wrong
// `size` cannot write past the buffer: the event is then measured again and
// written at its real size, and false is returned (a bug in the caller's
// size; the bytes are right either way).
bool AppendEventWire(const v1::Event& event, size_t size, EventsWire* wire);

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENTS_WIRE_H_
