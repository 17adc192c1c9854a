// PartitionTable: the partitions assigned to this replica and what the engine
// keeps per partition: its PartitionState (what is committable), assignment
// epoch (fencing: an event, delivery id or commit position of an older epoch
// is recognised as stale), the last committed position, offsets held by a
// `block` failure, the operator's pause (with the queued events set aside)
// and the consumption times that age the commit blocker.
//
// Threading: not thread-safe; guarded by the Engine's mutex. The blocked
// generation it bumps is an atomic the Engine owns and reads without it.
#ifndef FERRY_CORE_ENGINE_PARTITION_TABLE_H_
#define FERRY_CORE_ENGINE_PARTITION_TABLE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/engine/partition_state.h"
#include "core/engine/queued_event.h"
#include "core/engine/types.h"

namespace ferry {

class PartitionTable {
 public:
  // `blocked_generation` changes whenever the blocked set changes; it must
  // outlive the table.
  explicit PartitionTable(std::atomic<uint64_t>* blocked_generation)
      : blocked_generation_(*blocked_generation) {}
  PartitionTable(const PartitionTable&) = delete;
  PartitionTable& operator=(const PartitionTable&) = delete;

  struct Entry {
    PartitionState state;
    uint64_t epoch = 0;
    std::optional<int64_t> last_committed;
    // Offsets held by a `block` failure, with the event (for a later skip).
    std::map<int64_t, QueuedEvent> blocked;
    // This partition's consumed and unfinished events.
    int64_t buffered = 0;
    std::optional<int64_t> start_offset;
    // Operator pause: queued events set aside (in queue order) until resumed.
    bool paused = false;
    std::deque<QueuedEvent> parked;
  };

  // ---- Assignment and fencing ----
  // Starts a new assignment epoch (paused when the operator's set lists it).
  void Assign(const TopicPartition& tp);
  // Offset reset: forgets what was consumed and starts a new epoch.
  void Renew(Entry& entry);
  void Erase(const TopicPartition& tp);
  Entry* Find(const TopicPartition& tp) { return Find(tp.topic, tp.partition); }
  const Entry* Find(const TopicPartition& tp) const { return Find(tp.topic, tp.partition); }
  // The same without a TopicPartition (no topic string copied per lookup):
  // the topic among the few assigned, then the partition by index.
  Entry* Find(std::string_view topic, int32_t partition);
  const Entry* Find(std::string_view topic, int32_t partition) const;
  // The entry of `queued`'s partition when its epoch is still current.
  Entry* FindCurrent(const QueuedEvent& queued);
  // Records that `offset` was consumed at `now` (the age of the commit
  // blocker); false for an offset already begun in this assignment (a
  // duplicate record).
  bool Begin(Entry& entry, int64_t offset, absl::Time now);
  // `queued` reached a terminal result: its offset is done.
  void Finish(const QueuedEvent& queued);
  // Asks the CPU for the lines Finish(queued) will touch in the partition's
  // state (core/common/prefetch.h); reads the event's topic and partition.
  void PrefetchFinish(const QueuedEvent& queued);
  template <typename Fn>
  void ForEach(const Fn& fn) const {
    for (const auto& [tp, entry] : entries_) fn(tp, entry);
  }

  // ---- Commits ----
  std::vector<CommitPosition> PendingCommits() const;
  void MarkCommitted(const std::vector<CommitPosition>& positions);
  std::vector<CommitPosition> StillCurrent(const std::vector<CommitPosition>& positions) const;
  std::optional<CommitPosition> CommitPositionOf(const TopicPartition& tp) const;

  // ---- `block` failures ----
  // Holds `queued` (when its epoch is current); its partition stops.
  void Block(QueuedEvent queued);
  std::optional<QueuedEvent> TakeBlocked(Entry& entry, int64_t offset);
  std::vector<TopicPartition> BlockedPartitions() const;

  // ---- Operator pause ----
  struct PauseChange {
    std::set<TopicPartition> newly_paused;
    std::vector<TopicPartition> resumed;
  };
  PauseChange SetPaused(const std::set<TopicPartition>& paused);
  // Sets `queued` aside when its partition is paused (and returns true).
  bool ParkIfPaused(QueuedEvent& queued, bool front);
  // Sets `queued` aside unconditionally (its partition was just paused).
  void Park(QueuedEvent queued);
  std::deque<QueuedEvent> TakeParked(const TopicPartition& tp);

  // Drops the held events of these partitions, handing each to `released`:
  // blocked ones hold their lane (`holds_lane`), parked ones do not.
  void DropHeld(const std::set<TopicPartition>& partitions,
                const std::function<void(const QueuedEvent&, bool holds_lane)>& released);
  // Why `offset` cannot be skipped (not in flight, retrying or held).
  static std::string DescribeUnskippable(const Entry& entry, const TopicPartition& tp,
                                         int64_t offset);
  // Adds the partitions to `snapshot` (in-flight counts given per partition).
  void AddToSnapshot(const std::map<TopicPartition, int64_t>& in_flight,
                     EngineSnapshot* snapshot) const;

 private:
  // Inserts (or finds) the entry of `tp`, indexed for Find.
  Entry& Insert(const TopicPartition& tp);

  std::map<TopicPartition, Entry> entries_;
  // Find's index: per topic, the entries by partition number (null where not
  // assigned). Map nodes do not move, so the pointers stay valid until Erase
  // clears them.
  struct TopicIndex {
    std::string topic;
    std::vector<Entry*> by_partition;
  };
  std::vector<TopicIndex> index_;
  uint64_t next_epoch_ = 1;
  // The operator's pause set and how many assigned partitions are paused
  // (0 keeps the enqueue path free of lookups).
  std::set<TopicPartition> paused_set_;
  int paused_partitions_ = 0;
  std::atomic<uint64_t>& blocked_generation_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_PARTITION_TABLE_H_
