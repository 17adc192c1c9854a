// EventRouter: which processor handles an event type (a processor listing
// "*" takes every type no other processor names) and how a topic is ordered
// (a topic not in the config is KEY-ordered). The engine routes each event
// it accepts with it; EngineStats labels its series with the same answer.
//
// Both answers are looked up for every event, so the tables are sorted
// vectors searched by string_view: no string is built or hashed per lookup,
// and a config's usual handful of names is a comparison or two.
//
// Threading: immutable after construction; any thread.
#ifndef FERRY_CORE_ENGINE_EVENT_ROUTER_H_
#define FERRY_CORE_ENGINE_EVENT_ROUTER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/config.h"

namespace ferry {

class EventRouter {
 public:
  explicit EventRouter(const Config& config);
  // The processor index for an event type, or -1 when none handles it.
  int ProcessorFor(std::string_view type) const;
  // The "*" processor, or -1.
  int default_processor() const { return default_processor_; }
  Ordering OrderingFor(std::string_view topic) const;

 private:
  // Sorted by name, names unique.
  std::vector<std::pair<std::string, int>> processor_by_type_;
  int default_processor_ = -1;
  std::vector<std::pair<std::string, Ordering>> ordering_by_topic_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENT_ROUTER_H_
