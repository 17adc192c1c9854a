// Lanes: the ordering stage. Every queued event belongs to one lane; events of
// a lane leave it in FIFO order, and in KEY and PARTITION ordering a lane has
// at most one event in flight, so two events of one key are never processed
// at once or out of order (a run's members count one in-flight slot each and
// the worker handles them in order: core/engine/runs.h).
//
// LaneFor() maps an event to its lane: KEY ordering hashes the event key
// (records with an empty key are ordered per partition), PARTITION ordering
// hashes topic and partition. The hash is stable across processes and runs
// (FNV-1a), so a key's lane does not depend on who computes it.
//
// Threading: not thread-safe; the engine guards it.
#ifndef FERRY_CORE_ENGINE_LANES_H_
#define FERRY_CORE_ENGINE_LANES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/config/config.h"
#include "core/engine/lane_queue.h"

namespace ferry {

// Stable 64-bit FNV-1a.
uint64_t StableHash(absl::string_view bytes, uint64_t seed = 14695981039346656037ULL);

template <typename Item>
class Lanes {
 public:
  // A lane counts as full at `capacity_per_lane` queued items and as drained
  // at or below `low_mark` (default: half the capacity); both are kept as
  // counts so the engine's watermark checks do not scan the lanes.
  Lanes(int count, int capacity_per_lane, int low_mark = -1)
      : lanes_(static_cast<size_t>(count)),
        capacity_(static_cast<size_t>(capacity_per_lane)),
        low_mark_(static_cast<size_t>(low_mark >= 0 ? low_mark : capacity_per_lane / 2)) {}

  static int LaneFor(Ordering ordering, absl::string_view topic, int32_t partition,
                     absl::string_view key, int lane_count) {
    uint64_t hash;
    if (ordering == Ordering::kKey && !key.empty()) {
      hash = StableHash(key);
    } else {
      hash = StableHash(topic);
      const uint32_t p = static_cast<uint32_t>(partition);
      hash = StableHash(absl::string_view(reinterpret_cast<const char*>(&p), sizeof(p)), hash);
    }
    return static_cast<int>(hash % static_cast<uint64_t>(lane_count));
  }

  int count() const { return static_cast<int>(lanes_.size()); }
  size_t size(int lane) const { return lanes_[lane].queue.size(); }
  bool empty(int lane) const { return size(lane) == 0; }
  // A full lane still accepts (the record is already consumed); the engine
  // reports it so the consumer pauses fetching.
  bool full(int lane) const { return size(lane) >= capacity_; }
  // Whether any lane is full (the consumer asks after every batch, and there
  // are lanes per topic and class).
  bool any_full() const { return full_lanes_ > 0; }
  // Whether every lane is at or below the low mark.
  bool all_drained() const { return lanes_over_low_mark_ == 0; }
  bool busy(int lane) const { return lanes_[lane].in_flight > 0; }
  int in_flight(int lane) const { return lanes_[lane].in_flight; }

  void PushBack(int lane, Item item) {
    LaneQueue<Item>& queue = lanes_[lane].queue;
    const size_t before = queue.size();
    queue.push_back(std::move(item));
    Resized(before, before + 1);
  }
  // Used when an in-flight event comes back (retry, lost stream): it goes
  // first again so the lane's order holds.
  void PushFront(int lane, Item item) {
    LaneQueue<Item>& queue = lanes_[lane].queue;
    const size_t before = queue.size();
    queue.push_front(std::move(item));
    Resized(before, before + 1);
  }
  // Inserts at the front, after the leading items `stays_ahead` holds for
  // (a run member given back lines up after its run's earlier members).
  template <typename StaysAhead>
  void InsertNearFront(int lane, Item item, const StaysAhead& stays_ahead) {
    LaneQueue<Item>& queue = lanes_[lane].queue;
    const size_t before = queue.size();
    size_t at = 0;
    while (at < before && stays_ahead(queue[at])) ++at;
    queue.insert(at, std::move(item));
    Resized(before, before + 1);
  }
  Item& Front(int lane) { return lanes_[lane].queue.front(); }
  const Item& Front(int lane) const { return lanes_[lane].queue.front(); }
  Item PopFront(int lane) {
    LaneQueue<Item>& queue = lanes_[lane].queue;
    const size_t before = queue.size();
    Item item = queue.pop_front();
    Resized(before, before - 1);
    return item;
  }
  void AddInFlight(int lane) { ++lanes_[lane].in_flight; }
  void RemoveInFlight(int lane) { --lanes_[lane].in_flight; }

  // Removes every queued item matching `predicate`, keeping the order of the
  // rest. Returns the removed items.
  template <typename Predicate>
  std::vector<Item> RemoveIf(int lane, Predicate predicate) {
    std::vector<Item> removed;
    LaneQueue<Item>& queue = lanes_[lane].queue;
    const size_t before = queue.size();
    queue.Partition([&predicate](const Item& item) { return !predicate(item); },
                    [&removed](Item item) { removed.push_back(std::move(item)); });
    Resized(before, queue.size());
    return removed;
  }

 private:
  struct Lane {
    // There are thousands of lanes per flow (see AutoLaneCount): an empty
    // LaneQueue allocates nothing.
    LaneQueue<Item> queue;
    int in_flight = 0;
  };

  void Resized(size_t before, size_t after) {
    full_lanes_ += static_cast<int>(after >= capacity_) - static_cast<int>(before >= capacity_);
    lanes_over_low_mark_ +=
        static_cast<int>(after > low_mark_) - static_cast<int>(before > low_mark_);
  }

  std::vector<Lane> lanes_;
  size_t capacity_;
  size_t low_mark_;
  int full_lanes_ = 0;
  int lanes_over_low_mark_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_LANES_H_
