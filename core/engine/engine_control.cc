// Engine: operator commands (pause, offset reset, skip) and dropping the work
// of partitions that are revoked or reset. See core/engine/engine.h.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"

namespace ferry {

int64_t Engine::DropWorkLocked(const std::set<TopicPartition>& partitions) {
  auto is_dropped = [&partitions](const QueuedEvent& queued) {
    return partitions.count(queued.partition()) > 0;
  };
  int64_t dropped = 0;
  // Called within this function (by the components' removal loops): mu_ is
  // held. AssertHeld states it where the analysis cannot follow a callback.
  auto release_budget = [this, &dropped](const QueuedEvent& queued) {
    mu_.AssertHeld();
    budget_.Release(queued.bytes);
    ++dropped;
  };
  // Events holding their lane's in-flight slot give it back.
  auto release_with_lane = [this, &release_budget](const QueuedEvent& queued) {
    mu_.AssertHeld();
    queues_.ReturnLaneSlot(queued);
    release_budget(queued);
  };
  queues_.RemoveQueuedIf(is_dropped, [&release_budget](QueuedEvent queued) {
    release_budget(queued);
  });
  // In-flight deliveries of these partitions are forgotten: a late result
  // finds no id and is counted as stale. The worker still holds them, so the
  // stream's credit is not given back here.
  in_flight_.RemoveIf(is_dropped, [this, &release_budget](InFlightTable::Delivery&& delivery) {
    mu_.AssertHeld();
    streams_.EventLeft(delivery.stream_id);
    queues_.ReleaseLane(delivery.queued);
    release_budget(delivery.queued);
  });
  for (QueuedEvent& queued : queues_.TakeQuarantinedIf(is_dropped)) release_with_lane(queued);
  delayed_.RemovePartitions(
      [&partitions](const std::string& topic, int32_t partition) {
        return partitions.count(TopicPartition{topic, partition}) > 0;
      },
      [&release_budget](QueuedEvent&& queued) { release_budget(queued); });
  retries_.RemoveIf(is_dropped, [&release_with_lane](QueuedEvent queued) {
    release_with_lane(queued);
  });
  // Dead letters in flight for these partitions: their outcome no longer
  // matters (the records are read again), so forget them.
  dead_letters_.RemoveIf(is_dropped, release_budget);
  partitions_.DropHeld(partitions, [&release_budget, &release_with_lane](
                                       const QueuedEvent& queued, bool holds_lane) {
    if (holds_lane) {
      release_with_lane(queued);
    } else {
      release_budget(queued);
    }
  });
  counters_.dropped_on_revoke += dropped;
  if (stats_ != nullptr && dropped > 0) stats_->DroppedOnRevoke(dropped);
  return dropped;
}

void Engine::SetPaused(const std::set<TopicPartition>& paused) {
  SendingLock lock(this);
  const PartitionTable::PauseChange change = partitions_.SetPaused(paused);
  if (!change.newly_paused.empty()) ParkLocked(change.newly_paused);
  for (const TopicPartition& tp : change.resumed) {
    for (QueuedEvent& queued : partitions_.TakeParked(tp)) {
      EnqueueLocked(std::move(queued), /*front=*/false);
    }
  }
  if (!change.resumed.empty()) DispatchLocked();
}

void Engine::ParkLocked(const std::set<TopicPartition>& newly_paused) {
  // Park the queued events of newly paused partitions in queue order (per
  // lane, which keeps each key's order); in-flight events and retries
  // finish as usual.
  queues_.RemoveQueuedIf(
      [&newly_paused](const QueuedEvent& queued) {
        return newly_paused.count(queued.partition()) > 0;
      },
      [this](QueuedEvent queued) {
        mu_.AssertHeld();  // called within RemoveQueuedIf, under this call's lock
        partitions_.Park(std::move(queued));
      });
  queues_.MarkAllLanesReady();
}

void Engine::ResetPartition(const TopicPartition& tp) {
  SendingLock lock(this);
  if (partitions_.Find(tp) == nullptr) return;
  DropWorkLocked({tp});
  partitions_.Renew(*partitions_.Find(tp));
  queues_.MarkAllLanesReady();
  DispatchLocked();
}

absl::StatusOr<std::string> Engine::SkipOffset(const TopicPartition& tp, int64_t offset) {
  SendingLock lock(this);
  PartitionTable::Entry* entry = partitions_.Find(tp);
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(tp.ToString(), " is not assigned to this replica"));
  }
  std::optional<QueuedEvent> taken = TakeStuckLocked(*entry, tp, offset);
  if (!taken.has_value()) {
    return absl::FailedPreconditionError(PartitionTable::DescribeUnskippable(*entry, tp, offset));
  }
  const std::string where = absl::StrCat(tp.ToString(), "@", offset);
  const std::string& topic = config_.DeadLetterTopicFor(taken->processor);
  const bool to_dead_letter = !topic.empty() && dead_letter_writer_ != nullptr;
  LogWarn("engine", "operator skips ", where,
          to_dead_letter ? absl::StrCat(" (to ", topic, ")") : std::string(" (marked done)"));
  queues_.ReleaseLane(*taken);
  if (to_dead_letter) {
    DeadLetterLocked(std::move(*taken), topic, "skipped by an operator (SkipOffset)");
    DispatchLocked();
    return std::string("dead_lettered");
  }
  ++counters_.skipped;
  FinishLocked(*taken);
  DispatchLocked();
  return std::string("marked_done");
}

std::optional<QueuedEvent> Engine::TakeStuckLocked(PartitionTable::Entry& entry,
                                                   const TopicPartition& tp, int64_t offset) {
  std::optional<QueuedEvent> taken = partitions_.TakeBlocked(entry, offset);
  if (taken.has_value()) return taken;
  auto delivery = in_flight_.TakeOffset(tp, offset, entry.epoch);
  if (delivery.has_value()) {
    const auto& [id, flight] = *delivery;
    StreamTable::Entry* stream = streams_.Find(flight.stream_id);
    if (stream != nullptr) {
      --stream->in_flight;
      outbox_.PushCancel(flight.stream_id, stream->stream, {id});
    }
    return std::move(delivery->second.queued);
  }
  taken = retries_.TakeOffset(tp, offset);
  if (taken.has_value()) return taken;
  std::vector<QueuedEvent> quarantined = queues_.TakeQuarantinedIf(
      [&tp, offset](const QueuedEvent& queued) { return queued.Is(tp, offset); });
  if (!quarantined.empty()) return std::move(quarantined.front());
  return std::nullopt;
}

void Engine::SetRateLimits(const std::map<std::string, RateLimitConfig>& overrides) {
  SendingLock lock(this);
  guards_.SetRateLimits(overrides, clock_->Now());
  DispatchLocked();  // a lifted or raised limit frees waiting events now
}

}  // namespace ferry
