// Intake: the event a poison record (undecodable, oversize) becomes, so it
// can take the failure policy like any other terminal failure. (Routing an
// accepted event is core/engine/event_router.h; its budget is
// core/engine/intake_budget.h.)
//
// Threading: a pure function.
#ifndef FERRY_CORE_ENGINE_INTAKE_H_
#define FERRY_CORE_ENGINE_INTAKE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/engine/queued_event.h"
#include "core/kafka/record.h"

namespace ferry {

// The event of a poison record of assignment `epoch`, consumed at `now`: no
// processor, no lane, the record's bytes against the budget.
QueuedEvent PoisonEvent(const RawRecord& record, uint64_t epoch, absl::Time now);

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_INTAKE_H_
