// EventPool: finished Events kept for reuse instead of freed. An Event is a
// protobuf message with a heap string per field (topic, key, type, payload),
// so building one per record and freeing it after its result costs several
// allocations and frees, made on the consumer's poll thread and undone on a
// gRPC thread. A cleared Event keeps its strings and their buffers: the
// consumer decodes the next record into it (core/kafka/decoder.h moves the
// record's buffers in and gets the old ones back), and in the steady state
// no allocation is left on that path.
//
// Bounded by what the engine's intake budget has room for (the Limit each
// Recycle is given): the consumer fetches between the budget's low and high
// marks, so between two fetches the engine finishes up to half its budget
// of events, and each of those is needed again when fetching resumes. A pool
// that kept fewer (a fixed 4,096 did) freed the rest on gRPC's threads and
// the poll thread allocated them again. Kept within the room, the engine's
// events and the pool's together never exceed the budget, so the pool adds
// nothing to ferry's peak memory. An Event whose strings hold more than
// kMaxRetainedBytes (a big record's payload) is freed, not kept; a kept
// Event's headers are freed.
//
// Threading: none of its own; the Engine calls it with its mutex held.
#ifndef FERRY_CORE_ENGINE_EVENT_POOL_H_
#define FERRY_CORE_ENGINE_EVENT_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/v1/processor.pb.h"

namespace ferry {

class EventPool {
 public:
  static constexpr size_t kMaxRetainedBytes = 4096;

  // The most the pool may hold after a Recycle: the room left in the
  // engine's intake budget.
  struct Limit {
    int64_t events = 0;
    int64_t bytes = 0;
  };

  // Clears `event` and keeps it, or frees it when keeping it would take the
  // pool over `limit` or the event holds too much memory. Null is ignored.
  void Recycle(std::unique_ptr<v1::Event> event, Limit limit);
  // Moves up to `count` kept events (cleared) to the end of `out`.
  void TakeInto(size_t count, std::vector<std::unique_ptr<v1::Event>>* out);

  size_t size() const { return events_.size(); }
  // The sum of RetainedBytes over the events kept.
  int64_t retained_bytes() const { return retained_bytes_; }

  // The bytes `event`'s strings hold (their capacities), as the pool counts
  // them (headers are not kept).
  static size_t RetainedBytes(const v1::Event& event);

 private:
  struct Kept {
    std::unique_ptr<v1::Event> event;
    // Its RetainedBytes, counted once in Recycle: TakeInto runs on the poll
    // thread, where the Event's strings are cold and reading their
    // capacities again would wait on a miss per string.
    int64_t bytes = 0;
  };
  std::vector<Kept> events_;
  int64_t retained_bytes_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENT_POOL_H_
