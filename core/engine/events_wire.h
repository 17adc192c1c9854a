// Building an Events message's wire bytes straight from the engine's events
// (core/engine/worker_stream.h, EventsWire). Private to the engine target.
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

// The most an event's framing adds to its bytes: field 1 of v1::Events
// (length-delimited) and a varint length of at most 10 bytes.
inline constexpr int64_t kEventFraming = 1 + 10;

// Appends `event` (whose ByteSizeLong() is `size`) to an Events message's
// wire bytes: the serialization gRPC would otherwise do on a copy.
inline void AppendEventWire(const v1::Event& event, size_t size, EventsWire* wire) {
  using google::protobuf::io::CodedOutputStream;
  constexpr uint8_t kEventsEventTag = 0x0a;
  std::string& out = wire->bytes;
  if (out.empty()) out.reserve((size + kEventFraming) * 16);
  const size_t at = out.size();
  const size_t header = 1 + CodedOutputStream::VarintSize64(size);
  out.resize(at + header + size);
  auto* target = reinterpret_cast<uint8_t*>(&out[at]);
  *target++ = kEventsEventTag;
  target = CodedOutputStream::WriteVarint64ToArray(size, target);
  event.SerializeWithCachedSizesToArray(target);
  ++wire->count;
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENTS_WIRE_H_
