// WorkQueues: the events waiting for dispatch. Ordered topics wait in their
// lane (core/engine/lanes.h: at most one event of a lane in flight); a lane
// whose head may leave is listed as ready per (processor, flow) in the order
// it became ready, which makes dispatch round-robin across lanes. UNORDERED
// topics wait in one FIFO per (processor, flow). Events whose streams keep
// being lost wait in a per-processor quarantine (core/engine/redelivery.h).
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_WORK_QUEUES_H_
#define FERRY_CORE_ENGINE_WORK_QUEUES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "core/config/config.h"
#include "core/engine/lanes.h"
#include "core/engine/queued_event.h"
#include "core/engine/scheduler.h"
#include "core/engine/types.h"

namespace ferry {

class WorkQueues {
 public:
  WorkQueues(const Config& config, const SchedulingPlan& plan);
  WorkQueues(const WorkQueues&) = delete;
  WorkQueues& operator=(const WorkQueues&) = delete;

  // The lane of an event of `flow` (-1 for an UNORDERED topic).
  int LaneFor(Ordering ordering, int flow, const v1::Event& event) const;

  // Into its lane (or unordered queue), at the back or the front. At the
  // front, a run member lines up after its run's earlier members already
  // there (core/engine/runs.h, LinesUpBefore).
  void Enqueue(QueuedEvent queued, bool front);
  // The event left its lane's in-flight slot (finished or failed): the
  // lane's next event may go.
  void ReleaseLane(const QueuedEvent& queued);
  // The event left the in-flight slot but goes back into the lane at once
  // (a retry that is due, a redelivery, a dropped held event).
  void ReturnLaneSlot(const QueuedEvent& queued) {
    if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
  }
  void MarkAllLanesReady();

  // Dispatch: whether (processor, flow) may have an event, and the next one
  // (a ready lane's head, which takes the lane's in-flight slot; else the
  // head of the unordered queue).
  bool HasWork(int processor, int flow) const;
  std::optional<QueuedEvent> Take(int processor, int flow);
  // Runs (core/engine/runs.h): the next event of `head`'s lane when it may
  // follow `head` in a run (an ordered lane, the same processor, not held
  // back after a lost stream), else null; TakeRunMember then takes it, with
  // an in-flight slot of its own (the lane stays busy until every member is
  // answered).
  const QueuedEvent* PeekRunMember(const QueuedEvent& head) const;
  QueuedEvent TakeRunMember(int lane);

  // Removes the queued events (lanes and unordered queues, not quarantine)
  // matching `match`, handing each to `removed` in queue order.
  void RemoveQueuedIf(const std::function<bool(const QueuedEvent&)>& match,
                      const std::function<void(QueuedEvent)>& removed);

  // Quarantine: the event keeps its lane's in-flight slot while it waits.
  void Quarantine(QueuedEvent queued);
  std::deque<QueuedEvent>& quarantine(int processor) {
    return quarantine_[static_cast<size_t>(processor)];
  }
  std::vector<QueuedEvent> TakeQuarantinedIf(const std::function<bool(const QueuedEvent&)>& match);

  // Backpressure.
  bool any_lane_full() const { return lanes_.any_full(); }
  bool all_lanes_drained() const { return lanes_.all_drained(); }
  // Queue sizes (queued_events, longest_lane, lanes_in_use) for a snapshot.
  void AddToSnapshot(EngineSnapshot* snapshot) const;

 private:
  size_t QueueIndex(int processor, int flow) const {
    return static_cast<size_t>(processor) * static_cast<size_t>(flow_count_) +
           static_cast<size_t>(flow);
  }
  void MarkLaneReady(int lane);

  const int lane_count_;
  const int flow_count_;
  const bool single_processor_;
  Lanes<QueuedEvent> lanes_;
  // Lanes whose head may be dispatched, per (processor, flow) (QueueIndex),
  // in the order they became ready. A flow's lanes are flow * lane_count ...
  // + lane_count - 1.
  std::vector<std::deque<int>> ready_lanes_;
  std::vector<bool> lane_marked_ready_;
  std::vector<std::deque<QueuedEvent>> unordered_;
  std::vector<std::deque<QueuedEvent>> quarantine_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_WORK_QUEUES_H_
