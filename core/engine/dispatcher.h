// Dispatcher: moves queued events to worker streams with credit. Per
// processor: quarantined events first, each alone to a stream of its own
// (core/engine/redelivery.h); then, while a stream has room, the next event
// by priority class and flow (core/engine/scheduler.h) goes to the streams
// round-robin, batched into Events messages of at most max_batch events and
// max_batch_bytes, which are queued in the outbox. A stream never gets more
// than its credit or the processor's max_in_flight.
//
// Runs (core/engine/runs.h): when an ordered lane's head goes to a stream
// whose worker set Ready.max_run > 1, the lane's next events follow it in
// the same Events message, up to the run length that stream's credit, cap
// and the batch limits allow, all with one new run_id; each takes a unit of
// credit and an in-flight slot of the lane.
//
// Protecting downstream (core/engine/downstream_guard.h): a processor gets
// at most DownstreamGuards::Allowance events per dispatch (rate tokens,
// adaptive concurrency room, breaker probes), runs included.
//
// Threading: not thread-safe; Run is called by the Engine with its mutex
// held, and works on components that mutex guards (Parts).
#ifndef FERRY_CORE_ENGINE_DISPATCHER_H_
#define FERRY_CORE_ENGINE_DISPATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/downstream_guard.h"
#include "core/engine/in_flight_table.h"
#include "core/engine/outbox.h"
#include "core/engine/queued_event.h"
#include "core/engine/runs.h"
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
    DownstreamGuards& guards;
  };

  // `stats` may be null.
  Dispatcher(const Config& config, int flow_count, EngineStats* stats)
      : config_(config), flow_count_(flow_count), stats_(stats) {}

  void Run(const Parts& parts, absl::Time now);

 private:
  class Batches;
  // Each sends at most `allowance` events and takes what it sent off it.
  void DispatchProcessor(const Parts& parts, int processor, absl::Time now, int64_t& allowance);
  void DispatchQuarantined(const Parts& parts, int processor, absl::Time now,
                           int64_t& allowance);
  bool HasRoom(const Parts& parts, const StreamTable::Entry& stream, int64_t cap) const;
  // Moves the event to the in-flight table on the stream (credit, counts),
  // as member `run_position` (from 1) of run `run_id`, or alone (0, 0).
  const v1::Event& StartDelivery(const Parts& parts, QueuedEvent&& queued, int64_t stream_id,
                                 StreamTable::Entry& stream, absl::Time now, uint64_t run_id = 0,
                                 int run_position = 0);
  // Takes the events that follow `head` in its lane into a run of at most
  // `longest` (run_scratch_, `head` first; just `head` when none may follow)
  // and returns their estimated wire size.
  int64_t GatherRun(const Parts& parts, QueuedEvent head, int64_t longest, int64_t max_bytes);
  // Sends run_scratch_ (two or more members) to the stream as one run, in
  // one Events message.
  void SendRun(const Parts& parts, int64_t stream_id, StreamTable::Entry& stream,
               Batches& batches, int64_t run_bytes, absl::Time now);

  const Config& config_;
  const int flow_count_;
  EngineStats* const stats_;
  RunIds run_ids_;
  // Per-call scratch (kept to reuse its allocation).
  std::vector<int64_t> candidates_;
  std::vector<QueuedEvent> run_scratch_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_DISPATCHER_H_
