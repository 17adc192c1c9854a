#include "core/engine/partition_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

PartitionTable::Entry& PartitionTable::Insert(const TopicPartition& tp) {
  Entry& entry = entries_[tp];
  if (tp.partition < 0) return entry;  // not a Kafka partition: found by the map only
  auto topic = std::find_if(index_.begin(), index_.end(),
                            [&tp](const TopicIndex& t) { return t.topic == tp.topic; });
  if (topic == index_.end()) topic = index_.insert(index_.end(), TopicIndex{tp.topic, {}});
  const size_t partition = static_cast<size_t>(tp.partition);
  if (topic->by_partition.size() <= partition) topic->by_partition.resize(partition + 1, nullptr);
  topic->by_partition[partition] = &entry;
  return entry;
}

void PartitionTable::Assign(const TopicPartition& tp) {
  Entry& entry = Insert(tp);
  if (entry.paused) --paused_partitions_;
  Renew(entry);
  entry.paused = paused_set_.count(tp) > 0;
  if (entry.paused) ++paused_partitions_;
}

void PartitionTable::Renew(Entry& entry) {
  entry.state.Clear();
  entry.last_committed.reset();
  entry.start_offset.reset();
  entry.epoch = next_epoch_++;
}

void PartitionTable::Erase(const TopicPartition& tp) {
  auto it = entries_.find(tp);
  if (it == entries_.end()) return;
  if (it->second.paused) --paused_partitions_;
  for (TopicIndex& topic : index_) {
    if (topic.topic != tp.topic) continue;
    if (tp.partition >= 0 && static_cast<size_t>(tp.partition) < topic.by_partition.size()) {
      topic.by_partition[static_cast<size_t>(tp.partition)] = nullptr;
    }
  }
  entries_.erase(it);
}

PartitionTable::Entry* PartitionTable::Find(std::string_view topic, int32_t partition) {
  if (partition < 0) {  // never indexed (see Insert)
    auto it = entries_.find(TopicPartition{std::string(topic), partition});
    return it == entries_.end() ? nullptr : &it->second;
  }
  for (TopicIndex& t : index_) {
    if (t.topic.size() != topic.size() || std::string_view(t.topic) != topic) continue;
    if (static_cast<size_t>(partition) >= t.by_partition.size()) return nullptr;
    return t.by_partition[static_cast<size_t>(partition)];
  }
  return nullptr;
}

const PartitionTable::Entry* PartitionTable::Find(std::string_view topic,
                                                  int32_t partition) const {
  return const_cast<PartitionTable*>(this)->Find(topic, partition);
}

PartitionTable::Entry* PartitionTable::FindCurrent(const QueuedEvent& queued) {
  Entry* entry = Find(queued.event->topic(), queued.event->partition());
  return entry != nullptr && entry->epoch == queued.epoch ? entry : nullptr;
}

bool PartitionTable::Begin(Entry& entry, int64_t offset, absl::Time now) {
  if (!entry.state.Begin(offset, now)) return false;
  if (!entry.start_offset.has_value()) entry.start_offset = offset;
  ++entry.buffered;
  return true;
}

void PartitionTable::Finish(const QueuedEvent& queued) {
  Entry* entry = FindCurrent(queued);
  if (entry == nullptr) return;
  entry->state.Done(queued.event->offset());
  --entry->buffered;
}

void PartitionTable::PrefetchFinish(const QueuedEvent& queued) {
  const Entry* entry = FindCurrent(queued);
  if (entry != nullptr) entry->state.PrefetchDone(queued.event->offset());
}

std::vector<CommitPosition> PartitionTable::PendingCommits() const {
  std::vector<CommitPosition> positions;
  for (const auto& [tp, entry] : entries_) {
    const std::optional<int64_t> offset = entry.state.CommitOffset();
    if (offset.has_value() && offset != entry.last_committed) {
      positions.push_back({tp, *offset, entry.epoch});
    }
  }
  return positions;
}

void PartitionTable::MarkCommitted(const std::vector<CommitPosition>& positions) {
  for (const CommitPosition& position : positions) {
    Entry* entry = Find(position.partition);
    if (entry != nullptr && entry->epoch == position.epoch) {
      entry->last_committed = position.offset;
    }
  }
}

std::vector<CommitPosition> PartitionTable::StillCurrent(
    const std::vector<CommitPosition>& positions) const {
  std::vector<CommitPosition> current;
  for (const CommitPosition& position : positions) {
    const Entry* entry = Find(position.partition);
    if (entry != nullptr && entry->epoch == position.epoch) current.push_back(position);
  }
  return current;
}

std::optional<CommitPosition> PartitionTable::CommitPositionOf(const TopicPartition& tp) const {
  const Entry* entry = Find(tp);
  if (entry == nullptr || !entry->state.CommitOffset().has_value()) return std::nullopt;
  return CommitPosition{tp, *entry->state.CommitOffset(), entry->epoch};
}

void PartitionTable::Block(QueuedEvent queued) {
  Entry* entry = FindCurrent(queued);
  if (entry == nullptr) return;
  const int64_t offset = queued.event->offset();
  entry->blocked.emplace(offset, std::move(queued));
  ++blocked_generation_;
}

std::optional<QueuedEvent> PartitionTable::TakeBlocked(Entry& entry, int64_t offset) {
  auto it = entry.blocked.find(offset);
  if (it == entry.blocked.end()) return std::nullopt;
  QueuedEvent taken = std::move(it->second);
  entry.blocked.erase(it);
  ++blocked_generation_;
  return taken;
}

std::vector<TopicPartition> PartitionTable::BlockedPartitions() const {
  std::vector<TopicPartition> blocked;
  for (const auto& [tp, entry] : entries_) {
    if (!entry.blocked.empty()) blocked.push_back(tp);
  }
  return blocked;
}

PartitionTable::PauseChange PartitionTable::SetPaused(const std::set<TopicPartition>& paused) {
  PauseChange change;
  paused_partitions_ = 0;
  for (auto& [tp, entry] : entries_) {
    const bool should_pause = paused.count(tp) > 0;
    if (should_pause && !entry.paused) change.newly_paused.insert(tp);
    if (!should_pause && entry.paused) change.resumed.push_back(tp);
    entry.paused = should_pause;
    paused_partitions_ += should_pause ? 1 : 0;
  }
  // Partitions assigned later start paused when listed (see Assign).
  paused_set_ = paused;
  return change;
}

bool PartitionTable::ParkIfPaused(QueuedEvent& queued, bool front) {
  if (paused_partitions_ == 0) return false;
  Entry* entry = Find(queued.partition());
  if (entry == nullptr || !entry->paused) return false;
  if (front) {
    entry->parked.push_front(std::move(queued));
  } else {
    entry->parked.push_back(std::move(queued));
  }
  return true;
}

void PartitionTable::Park(QueuedEvent queued) {
  Insert(queued.partition()).parked.push_back(std::move(queued));
}

std::deque<QueuedEvent> PartitionTable::TakeParked(const TopicPartition& tp) {
  std::deque<QueuedEvent> parked;
  Entry* entry = Find(tp);
  if (entry != nullptr) parked.swap(entry->parked);
  return parked;
}

void PartitionTable::DropHeld(
    const std::set<TopicPartition>& partitions,
    const std::function<void(const QueuedEvent&, bool holds_lane)>& released) {
  bool unblocked = false;
  for (const TopicPartition& tp : partitions) {
    Entry* entry = Find(tp);
    if (entry == nullptr) continue;
    for (const auto& [offset, queued] : entry->blocked) released(queued, true);
    unblocked = unblocked || !entry->blocked.empty();
    entry->blocked.clear();
    for (const QueuedEvent& queued : entry->parked) released(queued, false);
    entry->parked.clear();
    entry->buffered = 0;
  }
  if (unblocked) ++blocked_generation_;
}

std::string PartitionTable::DescribeUnskippable(const Entry& entry, const TopicPartition& tp,
                                                int64_t offset) {
  const std::optional<int64_t> lowest = entry.state.LowestUnfinished();
  std::string state = "it is not in flight";
  if (lowest.has_value() && offset > *lowest && entry.state.Pending() > 0) {
    state = "it is not in flight (queued behind the commit blocker, already finished, or "
            "not consumed yet)";
  } else if (!lowest.has_value() || offset < *lowest) {
    state = "it is already finished or not consumed in this assignment";
  }
  return absl::StrCat(
      "cannot skip ", tp.ToString(), "@", offset, ": ", state,
      lowest.has_value() ? absl::StrCat("; the partition's lowest unfinished offset is ", *lowest)
                         : std::string("; the partition has no unfinished offset"));
}

void PartitionTable::AddToSnapshot(const std::map<TopicPartition, int64_t>& in_flight,
                                   EngineSnapshot* snapshot) const {
  for (const auto& [tp, entry] : entries_) {
    PartitionSnapshot partition;
    partition.partition = tp;
    partition.commit_offset = entry.state.CommitOffset();
    partition.lowest_unfinished = entry.state.LowestUnfinished();
    partition.pending = entry.state.Pending();
    partition.last_committed = entry.last_committed;
    partition.start_offset = entry.start_offset;
    partition.oldest_unfinished_since = entry.state.LowestUnfinishedSince();
    partition.buffered = entry.buffered;
    auto flying = in_flight.find(tp);
    partition.in_flight = flying != in_flight.end() ? flying->second : 0;
    partition.blocked = !entry.blocked.empty();
    partition.paused = entry.paused;
    partition.parked = static_cast<int64_t>(entry.parked.size());
    snapshot->blocked_events += static_cast<int64_t>(entry.blocked.size());
    snapshot->partitions.push_back(std::move(partition));
  }
}

}  // namespace ferry
