#include "core/engine/intake.h"

#include "core/kafka/event_header.h"

namespace ferry {

EventRouter::EventRouter(const Config& config) {
  for (size_t i = 0; i < config.processors.size(); ++i) {
    for (const std::string& type : config.processors[i].event_types) {
      if (type == "*") {
        default_processor_ = static_cast<int>(i);
      } else {
        processor_by_type_[type] = static_cast<int>(i);
      }
    }
  }
  for (const TopicConfig& topic : config.topics) ordering_by_topic_[topic.name] = topic.ordering;
}

int EventRouter::ProcessorFor(const std::string& type) const {
  auto it = processor_by_type_.find(type);
  return it != processor_by_type_.end() ? it->second : default_processor_;
}

Ordering EventRouter::OrderingFor(const std::string& topic) const {
  auto it = ordering_by_topic_.find(topic);
  return it != ordering_by_topic_.end() ? it->second : Ordering::kKey;
}

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
