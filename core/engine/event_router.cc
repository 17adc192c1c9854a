#include "core/engine/event_router.h"

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

}  // namespace ferry
