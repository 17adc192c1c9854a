// Test helper for the engine's component tests: a QueuedEvent built from the
// shared fixture's MakeEvent (tests/mocks/engine_fixtures.h).
//
// Threading: plain functions.
#ifndef FERRY_CORE_ENGINE_QUEUED_EVENT_TESTING_H_
#define FERRY_CORE_ENGINE_QUEUED_EVENT_TESTING_H_

#include <cstdint>
#include <string>
#include <utility>

#include "core/engine/queued_event.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {

// An event of `tp` at `offset` (key `key`) in assignment `epoch`, for
// processor 0, flow 0, `lane` (-1: unordered).
inline QueuedEvent Queued(const TopicPartition& tp, int64_t offset, uint64_t epoch = 1,
                          int lane = -1, const std::string& key = "k") {
  QueuedEvent queued;
  *queued.event = MakeEvent(tp, offset, key);
  queued.epoch = epoch;
  queued.lane = lane;
  queued.bytes = 10;
  return queued;
}

}  // namespace ferry::testing

#endif  // FERRY_CORE_ENGINE_QUEUED_EVENT_TESTING_H_
