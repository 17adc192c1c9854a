// Dispatcher: moves queued events to worker streams with credit. Per
// processor: quarantined events first, each alone to a stream of its own
// (core/engine/redelivery.h); then, while a stream has room, the next event
// by priority class and flow (core/engine/scheduler.h) goes to the streams
// round-robin, batched into Events messages of at most max_batch events and
// max_batch_bytes, which are queued in the outbox. A stream never gets more
// than its credit or the processor's max_in_flight.
//
// Threading: not thread-safe; Run is called by the Engine with its mutex
// held, and works on components that mutex guards (Parts).
#ifndef FERRY_CORE_ENGINE_DISPATCHER_H_
#define FERRY_CORE_ENGINE_DISPATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/in_flight_table.h"
#include "core/engine/outbox.h"
#include "core/engine/queued_event.h"
#include "core/engine/scheduler.h"
#include "core/engine/stream_table.h"
#include "core/engine/types.h"
#include "core/engine/work_queues.h"

namespace ferry {

class EngineStats;

class Dispatcher {
 public:
  // The Engine's components a dispatch works on (all guarded by its mutex).
  struct Parts {
    WorkQueues& queues;
    Scheduler& scheduler;
    StreamTable& streams;
    InFlightTable& in_flight;
    Outbox& outbox;
    EngineCounters& counters;
  };

  // `stats` may be null.
  Dispatcher(const Config& config, int flow_count, EngineStats* stats)
      : config_(config), flow_count_(flow_count), stats_(stats) {}

  void Run(const Parts& parts, absl::Time now);

 private:
  class Batches;
  void DispatchProcessor(const Parts& parts, int processor, absl::Time now);
  void DispatchQuarantined(const Parts& parts, int processor, absl::Time now);
  bool HasRoom(const Parts& parts, const StreamTable::Entry& stream, int64_t cap) const;
  // Moves the event to the in-flight table on the stream (credit, counts).
  const v1::Event& StartDelivery(const Parts& parts, QueuedEvent queued, int64_t stream_id,
                                 StreamTable::Entry& stream, absl::Time now);

  const Config& config_;
  const int flow_count_;
  EngineStats* const stats_;
  // Per-call scratch (kept to reuse its allocation).
  std::vector<int64_t> candidates_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_DISPATCHER_H_
