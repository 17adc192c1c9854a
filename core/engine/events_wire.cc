#include "core/engine/events_wire.h"

#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace ferry {
namespace {

// Writes `event` into exactly `size` bytes at `target`; false if it does not
// take exactly that many. SerializeWithCachedSizesToArray would check the
// size against the top-level cached size, which a delivery's stamps leave
// stale (DeliveredSize computes the new one without walking the event);
// _InternalSerialize is the generated serializer it calls, and uses only
// the headers' cached sizes, which nothing changes after submission.
bool SerializeExactly(const v1::Event& event, size_t size, uint8_t* target) {
  using google::protobuf::io::ArrayOutputStream;
  using google::protobuf::io::CodedOutputStream;
  using google::protobuf::io::EpsCopyOutputStream;
  ArrayOutputStream array(target, static_cast<int>(size));
  uint8_t* ptr = nullptr;
  EpsCopyOutputStream stream(&array, CodedOutputStream::IsDefaultSerializationDeterministic(),
                             &ptr);
  ptr = event._InternalSerialize(ptr, &stream);
  stream.Trim(ptr);
  return !stream.HadError() && array.ByteCount() == static_cast<int64_t>(size);
}

}  // namespace

bool AppendEventWire(const v1::Event& event, size_t size, EventsWire* wire) {
  using google::protobuf::io::CodedOutputStream;
  std::string& out = wire->bytes;
  if (out.empty()) out.reserve((size + kEventFraming) * 16);
  const size_t at = out.size();
  for (bool first = true;; first = false) {
    const size_t header = 1 + CodedOutputStream::VarintSize64(size);
    out.resize(at + header + size);
    auto* target = reinterpret_cast<uint8_t*>(&out[at]);
    target = WriteField1Header(size, target);
    if (SerializeExactly(event, size, target)) {
      ++wire->count;
      return first;
    }
    if (!first) break;
    size = event.ByteSizeLong();  // also refreshes the headers' cached sizes
  }
  // Measured just now and still not written exactly: cannot happen with a
  // message nothing else touches. The bytes stay as they were; the event,
  // in flight but never sent, times out and is sent again.
  out.resize(at);
  return false;
}

}  // namespace ferry
