// DelayStage: events that must not be dispatched before a due time (record
// timestamp + the topic's or event type's delay, topics[].delay / delays).
//
// One FIFO per (partition, delay): a partition's events of one delay leave in
// offset order, and since record timestamps within a partition are normally
// non-decreasing, their due times are too, so the FIFO only waits for its
// head. (A record stamped earlier than the one before it waits behind it: it
// leaves late, never early.) Events of one partition with different delays
// (per-type delays) are in different FIFOs and leave in due-time order: a
// short delay is not held up by a long one.
//
// The stage only holds events; the offsets were already begun in their
// PartitionState, so commits wait for delayed events like for any other
// unfinished one. Its size is bounded by the engine (budgets.max_delayed_events
// makes the consumer pause fetching), not here.
//
// Threading: not thread-safe; the engine guards it.
#ifndef FERRY_CORE_ENGINE_DELAY_STAGE_H_
#define FERRY_CORE_ENGINE_DELAY_STAGE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/time/time.h"

namespace ferry {

template <typename Item>
class DelayStage {
 public:
  // A FIFO: topic, partition, delay.
  using Key = std::tuple<std::string, int32_t, absl::Duration>;

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // True when an event of `key` due at `due` must be held at `now`: it is
  // not due yet, or earlier events of its FIFO are still held (they leave
  // first).
  bool MustHold(const Key& key, absl::Time due, absl::Time now) const {
    return due > now || queues_.count(key) > 0;
  }

  void Push(const Key& key, absl::Time due, Item item) {
    auto [it, inserted] = queues_.try_emplace(key);
    if (inserted) heads_.emplace(due, key);
    it->second.emplace_back(due, std::move(item));
    ++size_;
  }

  // Calls sink(Item&&) for every event due at `now`, earliest FIFO head
  // first, each FIFO in order.
  template <typename Sink>
  void PopDue(absl::Time now, const Sink& sink) {
    while (!heads_.empty() && heads_.begin()->first <= now) {
      const Key key = heads_.begin()->second;
      heads_.erase(heads_.begin());
      auto queue = queues_.find(key);
      while (!queue->second.empty() && queue->second.front().first <= now) {
        Item item = std::move(queue->second.front().second);
        queue->second.pop_front();
        --size_;
        sink(std::move(item));
      }
      if (queue->second.empty()) {
        queues_.erase(queue);
      } else {
        heads_.emplace(queue->second.front().first, key);
      }
    }
  }

  // Removes the events of the partitions for which drop(topic, partition)
  // is true, calling removed(Item&&) for each.
  template <typename Drop, typename Removed>
  void RemovePartitions(const Drop& drop, const Removed& removed) {
    for (auto it = queues_.begin(); it != queues_.end();) {
      if (!drop(std::get<0>(it->first), std::get<1>(it->first))) {
        ++it;
        continue;
      }
      heads_.erase({it->second.front().first, it->first});
      for (auto& [due, item] : it->second) {
        --size_;
        removed(std::move(item));
      }
      it = queues_.erase(it);
    }
  }

  // Events held for one partition.
  int64_t SizeFor(const std::string& topic, int32_t partition) const {
    int64_t count = 0;
    for (auto it = queues_.lower_bound(Key{topic, partition, -absl::InfiniteDuration()});
         it != queues_.end() && std::get<0>(it->first) == topic &&
         std::get<1>(it->first) == partition;
         ++it) {
      count += static_cast<int64_t>(it->second.size());
    }
    return count;
  }

 private:
  std::map<Key, std::deque<std::pair<absl::Time, Item>>> queues_;
  // (due time of the head, FIFO) for every non-empty FIFO.
  std::set<std::pair<absl::Time, Key>> heads_;
  int64_t size_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_DELAY_STAGE_H_
