// Lanes: the ordering stage. Every queued event belongs to one lane; events of
// a lane leave it in FIFO order, and in KEY and PARTITION ordering a lane has
// at most one event in flight, so two events of one key are never processed
// at once or out of order.
//
// LaneFor() maps an event to its lane: KEY ordering hashes the event key
// (records with an empty key are ordered per partition), PARTITION ordering
// hashes topic and partition. The hash is stable across processes and runs
// (FNV-1a), so a key's lane does not depend on who computes it.
//
// Threading: not thread-safe; the engine guards it.
#ifndef FERRY_CORE_LANES_H_
#define FERRY_CORE_LANES_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/config.h"

namespace ferry {

// Stable 64-bit FNV-1a.
uint64_t StableHash(absl::string_view bytes, uint64_t seed = 14695981039346656037ULL);

template <typename Item>
class Lanes {
 public:
  Lanes(int count, int capacity_per_lane)
      : lanes_(static_cast<size_t>(count)), capacity_(capacity_per_lane) {}

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
  bool empty(int lane) const { return lanes_[lane].queue.empty(); }
  // A full lane still accepts (the record is already consumed); the engine
  // reports it so the consumer pauses fetching.
  bool full(int lane) const {
    return lanes_[lane].queue.size() >= static_cast<size_t>(capacity_);
  }
  // Whether any lane is full (kept as a count: the consumer asks after every
  // record, and there are lanes per topic and class).
  bool any_full() const { return full_lanes_ > 0; }
  bool busy(int lane) const { return lanes_[lane].in_flight > 0; }
  int in_flight(int lane) const { return lanes_[lane].in_flight; }

  void PushBack(int lane, Item item) {
    lanes_[lane].queue.push_back(std::move(item));
    if (lanes_[lane].queue.size() == static_cast<size_t>(capacity_)) ++full_lanes_;
  }
  // Used when an in-flight event comes back (retry, lost stream): it goes
  // first again so the lane's order holds.
  void PushFront(int lane, Item item) {
    lanes_[lane].queue.push_front(std::move(item));
    if (lanes_[lane].queue.size() == static_cast<size_t>(capacity_)) ++full_lanes_;
  }
  Item& Front(int lane) { return lanes_[lane].queue.front(); }
  Item PopFront(int lane) {
    if (lanes_[lane].queue.size() == static_cast<size_t>(capacity_)) --full_lanes_;
    Item item = std::move(lanes_[lane].queue.front());
    lanes_[lane].queue.pop_front();
    return item;
  }
  void AddInFlight(int lane) { ++lanes_[lane].in_flight; }
  void RemoveInFlight(int lane) { --lanes_[lane].in_flight; }

  // Removes every queued item matching `predicate`, keeping the order of the
  // rest. Returns the removed items.
  template <typename Predicate>
  std::vector<Item> RemoveIf(int lane, Predicate predicate) {
    std::vector<Item> removed;
    std::deque<Item> kept;
    if (full(lane)) --full_lanes_;
    for (auto& item : lanes_[lane].queue) {
      if (predicate(item)) {
        removed.push_back(std::move(item));
      } else {
        kept.push_back(std::move(item));
      }
    }
    lanes_[lane].queue.swap(kept);
    if (full(lane)) ++full_lanes_;
    return removed;
  }

 private:
  struct Lane {
    std::deque<Item> queue;
    int in_flight = 0;
  };
  std::vector<Lane> lanes_;
  int capacity_;
  int full_lanes_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_LANES_H_
