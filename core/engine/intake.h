// Intake: what the engine decides about an event as it comes in from Kafka —
// which processor handles its type ("*" is the default), how its topic is
// ordered — and the event a poison record (undecodable, oversize) becomes,
// so it can take the failure policy like any other terminal failure.
//
// Threading: EventRouter is immutable after construction (any thread);
// PoisonEvent is a pure function.
#ifndef FERRY_CORE_ENGINE_INTAKE_H_
#define FERRY_CORE_ENGINE_INTAKE_H_

#include <map>
#include <string>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/queued_event.h"
#include "core/kafka/record.h"

namespace ferry {

class EventRouter {
 public:
  explicit EventRouter(const Config& config);
  // The processor index for an event type, or -1 when none handles it.
  int ProcessorFor(const std::string& type) const;
  // A topic not in the config is KEY-ordered.
  Ordering OrderingFor(const std::string& topic) const;

 private:
  std::map<std::string, int> processor_by_type_;
  int default_processor_ = -1;
  std::map<std::string, Ordering> ordering_by_topic_;
};

// The event of a poison record of assignment `epoch`, consumed at `now`: no
// processor, no lane, the record's bytes against the budget.
QueuedEvent PoisonEvent(const RawRecord& record, uint64_t epoch, absl::Time now);

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_INTAKE_H_
