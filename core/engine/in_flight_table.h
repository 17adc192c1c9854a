// InFlightTable: the events at a worker, by delivery id, with the stream that
// holds each and its deadline. It makes the delivery ids: the partition's
// assignment epoch in the top 24 bits and a per-process sequence below, so an
// id names the assignment it belongs to and is never reused (a result for an
// unknown id is stale).
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_IN_FLIGHT_TABLE_H_
#define FERRY_CORE_ENGINE_IN_FLIGHT_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/engine/queued_event.h"
#include "core/engine/types.h"

namespace ferry {

class InFlightTable {
 public:
  struct Delivery {
    QueuedEvent queued;
    int64_t stream_id = 0;
    absl::Time deadline;
    absl::Time dispatched_at;
  };

  static uint64_t MakeDeliveryId(uint64_t epoch, uint64_t sequence);

  // Stamps a new delivery id and the deadline (now + timeout) on the event
  // and holds it for `stream_id`. Returns the event, to be serialized before
  // the next Start.
  const v1::Event& Start(QueuedEvent&& queued, int64_t stream_id, absl::Time now,
                         absl::Duration timeout);
  // The delivery `id` when `stream_id` holds it, else null.
  Delivery* Find(uint64_t id, int64_t stream_id);
  bool contains(uint64_t id) const { return deliveries_.contains(id); }
  // Removes delivery `id`, which must exist.
  Delivery Take(uint64_t id);
  // Removes the deliveries whose deadline passed, with their ids.
  std::vector<std::pair<uint64_t, Delivery>> TakeExpired(absl::Time now);
  // Removes the events `stream_id` holds.
  std::vector<QueuedEvent> TakeStream(int64_t stream_id);
  // Removes the delivery of `offset` of `tp` in assignment `epoch`.
  std::optional<std::pair<uint64_t, Delivery>> TakeOffset(const TopicPartition& tp,
                                                          int64_t offset, uint64_t epoch);
  // Removes the deliveries whose event matches, handing each to `removed`.
  void RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                const std::function<void(Delivery&&)>& removed);

  int64_t size() const { return static_cast<int64_t>(deliveries_.size()); }
  int64_t CountIf(const std::function<bool(const v1::Event&)>& match) const;
  std::map<TopicPartition, int64_t> CountByPartition() const;

 private:
  absl::flat_hash_map<uint64_t, Delivery> deliveries_;
  uint64_t next_sequence_ = 1;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_IN_FLIGHT_TABLE_H_
