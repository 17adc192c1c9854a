#include "core/engine/event_router.h"

#include <algorithm>
#include <map>

namespace ferry {
namespace {

// The value for `name` in a vector sorted by name, or `fallback`. A config
// names a few topics and types: up to a handful a scan comparing lengths
// first is cheaper than bisecting.
template <typename Value>
Value Lookup(const std::vector<std::pair<std::string, Value>>& table, std::string_view name,
             Value fallback) {
  constexpr size_t kScanUpTo = 8;
  if (table.size() <= kScanUpTo) {
    for (const auto& [key, value] : table) {
      if (key.size() == name.size() && std::string_view(key) == name) return value;
    }
    return fallback;
  }
  auto it = std::lower_bound(
      table.begin(), table.end(), name,
      [](const std::pair<std::string, Value>& entry, std::string_view n) {
        return std::string_view(entry.first) < n;
      });
  return it != table.end() && it->first == name ? it->second : fallback;
}

}  // namespace

EventRouter::EventRouter(const Config& config) {
  // Through maps first: a name listed twice keeps its last value, as before.
  std::map<std::string, int> processors;
  for (size_t i = 0; i < config.processors.size(); ++i) {
    for (const std::string& type : config.processors[i].event_types) {
      if (type == "*") {
        default_processor_ = static_cast<int>(i);
      } else {
        processors[type] = static_cast<int>(i);
      }
    }
  }
  std::map<std::string, Ordering> orderings;
  for (const TopicConfig& topic : config.topics) orderings[topic.name] = topic.ordering;
  processor_by_type_.assign(processors.begin(), processors.end());
  ordering_by_topic_.assign(orderings.begin(), orderings.end());
}

int EventRouter::ProcessorFor(std::string_view type) const {
  return Lookup(processor_by_type_, type, default_processor_);
}

Ordering EventRouter::OrderingFor(std::string_view topic) const {
  return Lookup(ordering_by_topic_, topic, Ordering::kKey);
}

}  // namespace ferry
