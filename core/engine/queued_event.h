// QueuedEvent: one consumed event on its way through the engine, with what
// the engine needs to route, budget and finish it. It moves between the
// engine's components (work queues, in-flight table, retry queue, dead-letter
// tracking, partition table) and is owned by exactly one of them at a time.
//
// Threading: a plain value; the components holding it are guarded by the
// Engine's mutex.
#ifndef FERRY_CORE_ENGINE_QUEUED_EVENT_H_
#define FERRY_CORE_ENGINE_QUEUED_EVENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "core/engine/types.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

struct QueuedEvent {
  QueuedEvent() = default;
  // Takes `event` (never null) without allocating another.
  explicit QueuedEvent(std::unique_ptr<v1::Event> event) : event(std::move(event)) {}

  // Held by pointer: a queued event moves from lane to dispatch to the
  // in-flight table, and a pointer moves for free where a message does not.
  // Never null except in a moved-from QueuedEvent.
  std::unique_ptr<v1::Event> event = std::make_unique<v1::Event>();
  int64_t bytes = 0;
  // The event's wire size without the fields a delivery stamps, measured
  // once at submission (core/engine/events_wire.h, UnstampedWireSize); -1:
  // not measured, each delivery measures the whole event.
  int64_t unstamped_size = -1;
  uint64_t epoch = 0;
  int lane = 0;  // -1: not in a lane (unordered, poison, unroutable)
  int processor = 0;
  int flow = 0;  // (topic, priority class): see core/engine/scheduler.h
  std::optional<std::string> record_key;
  // Metrics: the bounded type label, when it entered its queue, and
  // whether it is queued again after a lost stream (not a new attempt).
  int type_index = 0;
  absl::Time queued_at;
  bool redelivery = false;
  // Lost streams it was in flight on (core/engine/redelivery.h).
  int strikes = 0;
  // The run it was last sent in (core/engine/runs.h) and its place in it,
  // from 1; 0 when sent alone. Kept while it waits in its lane again, so a
  // member given back lines up after the earlier members of its run.
  uint64_t run_id = 0;
  int run_position = 0;

  TopicPartition partition() const { return TopicPartition{event->topic(), event->partition()}; }
  bool Is(const TopicPartition& tp, int64_t offset) const {
    return event->offset() == offset && event->partition() == tp.partition &&
           event->topic() == tp.topic;
  }
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_QUEUED_EVENT_H_
