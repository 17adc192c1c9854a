// EventPool: finished Events kept for reuse instead of freed. An Event is a
// protobuf message with a heap string per field (topic, key, type, payload),
// so building one per record and freeing it after its result costs several
// allocations and frees, made on the consumer's poll thread and undone on a
// gRPC thread. A cleared Event keeps its strings and their buffers: the
// consumer decodes the next record into it (core/kafka/decoder.h moves the
// record's buffers in and gets the old ones back), and in the steady state
// no allocation is left on that path.
//
// Bounded: at most kMaxEvents are kept, and an Event whose strings hold more
// than kMaxRetainedBytes (a big record's payload) is freed, not kept; a kept
// Event's headers are freed. So the pool never holds more than about
// kMaxEvents x kMaxRetainedBytes (16 MiB) outside the engine's byte budget.
//
// Threading: none of its own; the Engine calls it with its mutex held.
#ifndef FERRY_CORE_ENGINE_EVENT_POOL_H_
#define FERRY_CORE_ENGINE_EVENT_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "ferry/v1/processor.pb.h"

namespace ferry {

class EventPool {
 public:
  static constexpr size_t kMaxEvents = 4096;
  static constexpr size_t kMaxRetainedBytes = 4096;

  // Clears `event` and keeps it, or frees it when the pool is full or the
  // event holds too much memory. Null is ignored.
  void Recycle(std::unique_ptr<v1::Event> event);
  // Moves up to `count` kept events (cleared) to the end of `out`.
  void TakeInto(size_t count, std::vector<std::unique_ptr<v1::Event>>* out);

  size_t size() const { return events_.size(); }

  // The bytes `event`'s strings hold (their capacities), as the pool counts
  // them (headers are not kept).
  static size_t RetainedBytes(const v1::Event& event);

 private:
  std::vector<std::unique_ptr<v1::Event>> events_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENT_POOL_H_
