#include "core/engine/intake.h"

#include "core/kafka/event_header.h"

namespace ferry {

QueuedEvent PoisonEvent(const RawRecord& record, uint64_t epoch, absl::Time now) {
  QueuedEvent queued;
  queued.bytes = record.ByteSize();
  queued.epoch = epoch;
  queued.lane = -1;
  queued.processor = -1;
  queued.record_key = record.key;
  queued.queued_at = now;
  queued.event->set_topic(record.topic);
  queued.event->set_partition(record.partition);
  queued.event->set_offset(record.offset);
  queued.event->set_payload(record.payload);
  queued.event->set_timestamp_ms(record.timestamp_ms);
  for (const auto& [name, value] : record.headers) {
    AddEventHeader(queued.event.get(), name, value);
  }
  return queued;
}

}  // namespace ferry
