#include "core/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/engine/engine_stats.h"
#include "core/kafka/event_header.h"
#include "core/engine/events_wire.h"
#include "core/common/log.h"
#include "core/common/worker_text.h"

namespace ferry {

std::string TopicPartition::ToString() const { return absl::StrCat(topic, "/", partition); }

namespace {

// Delivery ids: the partition's assignment epoch in the top 24 bits, a
// per-process sequence below, so an id names the assignment it belongs to.
constexpr int kSequenceBits = 40;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kSequenceBits) - 1;

uint64_t MakeDeliveryId(uint64_t epoch, uint64_t sequence) {
  return ((epoch & 0xFFFFFF) << kSequenceBits) | (sequence & kSequenceMask);
}

constexpr absl::Duration kDeadLetterRetryBackoff = absl::Seconds(1);

}  // namespace

class ABSL_SCOPED_LOCKABLE Engine::SendingLock {
 public:
  explicit SendingLock(Engine* engine) ABSL_EXCLUSIVE_LOCK_FUNCTION(engine->mu_)
      : engine_(engine) {
    engine_->mu_.Lock();
  }
  ~SendingLock() ABSL_UNLOCK_FUNCTION() { engine_->FlushOutboxAndUnlock(); }
  SendingLock(const SendingLock&) = delete;
  SendingLock& operator=(const SendingLock&) = delete;

 private:
  Engine* const engine_;
};

void Engine::FlushOutboxAndUnlock() {
  // One sender at a time keeps each stream's messages in the order they were
  // queued; a thread that finds another sending leaves its messages to it.
  if (flushing_ || outbox_.empty()) {
    mu_.Unlock();
    return;
  }
  flushing_ = true;
  flusher_ = std::this_thread::get_id();
  std::vector<Outgoing> round;
  while (!outbox_.empty()) {
    round.swap(outbox_);
    ++flush_rounds_started_;
    mu_.Unlock();
    for (Outgoing& out : round) {
      if (!closed_while_flushing_.empty() &&
          std::find(closed_while_flushing_.begin(), closed_while_flushing_.end(),
                    out.stream_id) != closed_while_flushing_.end()) {
        continue;  // its OnDone ran inline in one of our sends
      }
      if (out.cancel) {
        out.stream->SendCancel(std::move(out.ids));
      } else {
        out.stream->SendEvents(std::move(out.events));
      }
    }
    round.clear();
    mu_.Lock();
    ++flush_rounds_done_;
  }
  closed_while_flushing_.clear();
  flushing_ = false;
  mu_.Unlock();
}

Engine::Engine(const Config& config, const Clock* clock, DeadLetterWriter* dead_letters,
               EngineStats* stats)
    : config_(config),
      clock_(clock),
      dead_letters_(dead_letters),
      stats_(stats),
      plan_(config),
      lanes_(config.lane_count * plan_.flow_count(), config.lane_capacity,
             static_cast<int>(config.lane_capacity * config.resume_fraction)),
      ready_lanes_(config.processors.size() * static_cast<size_t>(plan_.flow_count())),
      lane_marked_ready_(static_cast<size_t>(lanes_.count()), false),
      unordered_(config.processors.size() * static_cast<size_t>(plan_.flow_count())),
      scheduler_(plan_, static_cast<int>(config.processors.size())),
      last_stream_used_(config.processors.size(), 0),
      quarantine_(config.processors.size()) {
  for (size_t i = 0; i < config_.processors.size(); ++i) {
    for (const std::string& type : config_.processors[i].event_types) {
      if (type == "*") {
        default_processor_ = static_cast<int>(i);
      } else {
        processor_by_type_[type] = static_cast<int>(i);
      }
    }
  }
  for (const TopicConfig& topic : config_.topics) {
    ordering_by_topic_[topic.name] = topic.ordering;
  }
}

int Engine::ProcessorFor(const std::string& type) const {
  auto it = processor_by_type_.find(type);
  return it != processor_by_type_.end() ? it->second : default_processor_;
}

Ordering Engine::OrderingFor(const std::string& topic) const {
  auto it = ordering_by_topic_.find(topic);
  return it != ordering_by_topic_.end() ? it->second : Ordering::kKey;
}

void Engine::OnAssigned(const std::vector<TopicPartition>& partitions) {
  absl::MutexLock lock(&mu_);
  for (const TopicPartition& tp : partitions) {
    PartitionEntry& entry = partitions_[tp];
    entry.state.Clear();
    entry.last_committed.reset();
    entry.begun.clear();
    entry.start_offset.reset();
    entry.epoch = next_epoch_++;
    entry.paused = paused_set_.count(tp) > 0;
    if (entry.paused) ++paused_partitions_;
  }
}

std::vector<CommitPosition> Engine::OnRevoked(const std::vector<TopicPartition>& partitions) {
  SendingLock lock(this);
  std::vector<CommitPosition> positions;
  std::set<TopicPartition> revoked;
  for (const TopicPartition& tp : partitions) {
    auto it = partitions_.find(tp);
    if (it == partitions_.end()) continue;
    revoked.insert(tp);
    if (it->second.state.CommitOffset().has_value()) {
      positions.push_back({tp, *it->second.state.CommitOffset(), it->second.epoch});
    }
  }
  if (revoked.empty()) return positions;
  DropWorkLocked(revoked);
  for (const TopicPartition& tp : revoked) {
    if (partitions_[tp].paused) --paused_partitions_;
    partitions_.erase(tp);
  }
  for (int lane = 0; lane < lanes_.count(); ++lane) MarkLaneReadyLocked(lane);
  DispatchLocked();
  return positions;
}

int64_t Engine::DropWorkLocked(const std::set<TopicPartition>& partitions) {
  auto is_dropped = [&partitions](const QueuedEvent& queued) {
    return partitions.count(TopicPartition{queued.event->topic(), queued.event->partition()}) > 0;
  };
  int64_t dropped = 0;
  auto release_budget = [this, &dropped](const QueuedEvent& queued)
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --buffered_events_;
    buffered_bytes_ -= queued.bytes;
    ++dropped;
  };
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    for (const QueuedEvent& queued : lanes_.RemoveIf(lane, is_dropped)) release_budget(queued);
  }
  for (auto& queue : unordered_) {
    std::deque<QueuedEvent> kept;
    for (QueuedEvent& queued : queue) {
      if (is_dropped(queued)) {
        release_budget(queued);
      } else {
        kept.push_back(std::move(queued));
      }
    }
    queue.swap(kept);
  }
  // In-flight deliveries of these partitions are forgotten: a late result
  // finds no id and is counted as stale. The worker still holds them, so the
  // stream's credit is not given back here.
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (is_dropped(it->second.queued)) {
      auto stream = streams_.find(it->second.stream_id);
      if (stream != streams_.end()) --stream->second.in_flight;
      ReleaseLaneLocked(it->second.queued);
      release_budget(it->second.queued);
      in_flight_.erase(it++);
    } else {
      ++it;
    }
  }
  for (QueuedEvent& queued : TakeQuarantinedLocked(is_dropped)) {
    if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
    release_budget(queued);
  }
  delayed_.RemovePartitions(
      [&partitions](const std::string& topic, int32_t partition) {
        return partitions.count(TopicPartition{topic, partition}) > 0;
      },
      // Called by RemovePartitions, within this call: mu_ is held.
      [this, &release_budget](QueuedEvent&& queued) {
        mu_.AssertHeld();
        release_budget(queued);
      });
  for (auto it = retries_.begin(); it != retries_.end();) {
    if (is_dropped(it->second)) {
      if (it->second.lane >= 0) lanes_.RemoveInFlight(it->second.lane);
      release_budget(it->second);
      it = retries_.erase(it);
    } else {
      ++it;
    }
  }
  // Dead letters in flight for these partitions: their outcome no longer
  // matters (the records are read again), so forget them.
  for (auto it = dead_letters_pending_.begin(); it != dead_letters_pending_.end();) {
    if (is_dropped(it->second.queued)) {
      release_budget(it->second.queued);
      it = dead_letters_pending_.erase(it);
    } else {
      ++it;
    }
  }
  bool unblocked = false;
  for (const TopicPartition& tp : partitions) {
    auto it = partitions_.find(tp);
    if (it == partitions_.end()) continue;
    for (auto& [offset, queued] : it->second.blocked) {
      if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
      release_budget(queued);
      unblocked = true;
    }
    it->second.blocked.clear();
    for (const QueuedEvent& queued : it->second.parked) release_budget(queued);
    it->second.parked.clear();
    it->second.buffered = 0;
  }
  if (unblocked) ++blocked_generation_;
  counters_.dropped_on_revoke += dropped;
  if (stats_ != nullptr && dropped > 0) stats_->DroppedOnRevoke(dropped);
  return dropped;
}

void Engine::SetPaused(const std::set<TopicPartition>& paused) {
  SendingLock lock(this);
  std::set<TopicPartition> newly_paused;
  std::vector<TopicPartition> resumed;
  for (auto& [tp, entry] : partitions_) {
    const bool should_pause = paused.count(tp) > 0;
    if (should_pause && !entry.paused) newly_paused.insert(tp);
    if (!should_pause && entry.paused) resumed.push_back(tp);
    entry.paused = should_pause;
  }
  paused_partitions_ = 0;
  for (const auto& [tp, entry] : partitions_) paused_partitions_ += entry.paused ? 1 : 0;
  // Partitions assigned later start paused when listed (see OnAssigned).
  paused_set_ = paused;
  if (!newly_paused.empty()) {
    // Park the queued events of newly paused partitions in queue order (per
    // lane, which keeps each key's order); in-flight events and retries
    // finish as usual.
    auto is_paused = [&newly_paused](const QueuedEvent& queued) {
      return newly_paused.count(TopicPartition{queued.event->topic(), queued.event->partition()}) > 0;
    };
    for (int lane = 0; lane < lanes_.count(); ++lane) {
      for (QueuedEvent& queued : lanes_.RemoveIf(lane, is_paused)) {
        partitions_[TopicPartition{queued.event->topic(), queued.event->partition()}]
            .parked.push_back(std::move(queued));
      }
      MarkLaneReadyLocked(lane);
    }
    for (auto& queue : unordered_) {
      std::deque<QueuedEvent> kept;
      for (QueuedEvent& queued : queue) {
        if (is_paused(queued)) {
          partitions_[TopicPartition{queued.event->topic(), queued.event->partition()}]
              .parked.push_back(std::move(queued));
        } else {
          kept.push_back(std::move(queued));
        }
      }
      queue.swap(kept);
    }
  }
  for (const TopicPartition& tp : resumed) {
    std::deque<QueuedEvent> parked;
    parked.swap(partitions_[tp].parked);
    for (QueuedEvent& queued : parked) EnqueueLocked(std::move(queued), /*front=*/false);
  }
  if (!resumed.empty()) DispatchLocked();
}

void Engine::ResetPartition(const TopicPartition& tp) {
  SendingLock lock(this);
  auto it = partitions_.find(tp);
  if (it == partitions_.end()) return;
  DropWorkLocked({tp});
  PartitionEntry& entry = it->second;
  entry.state.Clear();
  entry.last_committed.reset();
  entry.begun.clear();
  entry.start_offset.reset();
  entry.epoch = next_epoch_++;
  for (int lane = 0; lane < lanes_.count(); ++lane) MarkLaneReadyLocked(lane);
  DispatchLocked();
}

absl::StatusOr<std::string> Engine::SkipOffset(const TopicPartition& tp, int64_t offset) {
  SendingLock lock(this);
  auto entry = partitions_.find(tp);
  const std::string where = absl::StrCat(tp.ToString(), "@", offset);
  if (entry == partitions_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(tp.ToString(), " is not assigned to this replica"));
  }
  const std::string reason = "skipped by an operator (SkipOffset)";
  std::optional<QueuedEvent> taken;
  auto blocked = entry->second.blocked.find(offset);
  if (blocked != entry->second.blocked.end()) {
    taken = std::move(blocked->second);
    entry->second.blocked.erase(blocked);
    ++blocked_generation_;
  }
  if (!taken.has_value()) {
    for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it) {
      const QueuedEvent& queued = it->second.queued;
      if (queued.event->offset() != offset || queued.event->partition() != tp.partition ||
          queued.event->topic() != tp.topic || queued.epoch != entry->second.epoch) {
        continue;
      }
      auto stream = streams_.find(it->second.stream_id);
      if (stream != streams_.end()) {
        --stream->second.in_flight;
        Outgoing cancel;
        cancel.stream_id = stream->first;
        cancel.stream = stream->second.stream;
        cancel.cancel = true;
        cancel.ids.push_back(it->first);
        outbox_.push_back(std::move(cancel));
      }
      taken = std::move(it->second.queued);
      in_flight_.erase(it);
      break;
    }
  }
  if (!taken.has_value()) {
    for (auto it = retries_.begin(); it != retries_.end(); ++it) {
      if (it->second.event->offset() == offset && it->second.event->partition() == tp.partition &&
          it->second.event->topic() == tp.topic) {
        taken = std::move(it->second);
        retries_.erase(it);
        break;
      }
    }
  }
  if (!taken.has_value()) {
    std::vector<QueuedEvent> quarantined =
        TakeQuarantinedLocked([&tp, offset](const QueuedEvent& queued) {
          return queued.event->offset() == offset && queued.event->partition() == tp.partition &&
                 queued.event->topic() == tp.topic;
        });
    if (!quarantined.empty()) taken = std::move(quarantined.front());
  }
  if (!taken.has_value()) {
    const std::optional<int64_t> lowest = entry->second.state.LowestUnfinished();
    std::string state = "it is not in flight";
    if (lowest.has_value() && offset > *lowest && entry->second.state.Pending() > 0) {
      state = "it is not in flight (queued behind the commit blocker, already finished, or "
              "not consumed yet)";
    } else if (!lowest.has_value() || offset < *lowest) {
      state = "it is already finished or not consumed in this assignment";
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot skip ", where, ": ", state,
        lowest.has_value() ? absl::StrCat("; the partition's lowest unfinished offset is ", *lowest)
                           : std::string("; the partition has no unfinished offset")));
  }
  const std::string& topic = config_.DeadLetterTopicFor(taken->processor);
  LogWarn("engine", "operator skips ", where,
          topic.empty() || dead_letters_ == nullptr ? " (marked done)"
                                                    : absl::StrCat(" (to ", topic, ")"));
  ReleaseLaneLocked(*taken);
  if (!topic.empty() && dead_letters_ != nullptr) {
    DeadLetterLocked(std::move(*taken), topic, reason);
    DispatchLocked();
    return std::string("dead_lettered");
  }
  ++counters_.skipped;
  FinishLocked(*taken);
  DispatchLocked();
  return std::string("marked_done");
}

void Engine::Submit(v1::Event event, int64_t bytes, std::optional<std::string> record_key) {
  SendingLock lock(this);
  SubmitLocked(std::move(event), bytes, std::move(record_key), clock_->Now());
  DispatchLocked();
}

void Engine::SubmitBatch(std::vector<SubmitItem>& items) {
  if (items.empty()) return;
  SendingLock lock(this);
  const absl::Time now = clock_->Now();
  for (SubmitItem& item : items) {
    SubmitLocked(std::move(item.event), item.bytes, std::move(item.record_key), now);
  }
  DispatchLocked();
}

Engine::Headroom Engine::Room() const {
  absl::MutexLock lock(&mu_);
  Headroom room;
  room.events = std::min<int64_t>(config_.max_buffered_events - buffered_events_,
                                  config_.max_delayed_events - delayed_.size());
  room.bytes = config_.max_buffered_bytes - buffered_bytes_;
  return room;
}

void Engine::SubmitLocked(v1::Event event, int64_t bytes, std::optional<std::string> record_key,
                          absl::Time now) {
  const TopicPartition tp{event.topic(), event.partition()};
  auto it = partitions_.find(tp);
  if (it == partitions_.end()) {
    // A record of a partition no longer assigned: its new owner reads it.
    ++counters_.dropped_on_revoke;
    if (stats_ != nullptr) stats_->DroppedOnRevoke(1);
    return;
  }
  if (!it->second.state.Begin(event.offset())) {
    ++counters_.duplicate_records;  // already being processed in this assignment
    if (stats_ != nullptr) stats_->DuplicateRecord();
    return;
  }
  NoteBegunLocked(it->second, event.offset(), now);
  ++counters_.submitted;
  ++buffered_events_;
  ++it->second.buffered;
  buffered_bytes_ += bytes;
  if (stats_ != nullptr) stats_->RecordConsumed(tp.topic, bytes);

  QueuedEvent queued;
  queued.bytes = bytes;
  queued.epoch = it->second.epoch;
  queued.processor = ProcessorFor(event.type());
  queued.record_key = std::move(record_key);
  queued.type_index = stats_ != nullptr ? stats_->TypeIndex(event.type()) : 0;
  queued.queued_at = now;
  event.set_attempt(1);
  *queued.event = std::move(event);
  if (queued.processor < 0) {
    ++counters_.failed;
    queued.lane = -1;
    const std::string type = queued.event->type();
    FailLocked(std::move(queued),
               absl::StrCat("no processor handles event type \"", type,
                            "\" (add it to a processor's event_types, or add a \"*\" processor)"));
    return;
  }
  const Ordering ordering = OrderingFor(tp.topic);
  const SchedulingPlan::Route route = plan_.RouteFor(tp.topic, queued.event->type());
  queued.flow = route.flow;
  queued.lane = ordering == Ordering::kUnordered
                    ? -1
                    : route.flow * config_.lane_count +
                          Lanes<QueuedEvent>::LaneFor(ordering, tp.topic, tp.partition,
                                                      queued.event->key(), config_.lane_count);
  if (route.delay > absl::ZeroDuration()) {
    // Due at event time + delay. The event time is the record timestamp,
    // but never later than now (a record stamped in the future by a skewed
    // clock waits at most the delay), and now for a record without one.
    const int64_t timestamp_ms = queued.event->timestamp_ms();
    const absl::Time event_time =
        timestamp_ms > 0 ? std::min(absl::FromUnixMillis(timestamp_ms), now) : now;
    const absl::Time due = event_time + route.delay;
    const DelayStage<QueuedEvent>::Key key{tp.topic, tp.partition, route.delay};
    if (delayed_.MustHold(key, due, now)) {
      delayed_.Push(key, due, std::move(queued));
      return;
    }
  }
  EnqueueLocked(std::move(queued), /*front=*/false);
}

void Engine::SubmitPoison(const RawRecord& record, const std::string& error) {
  absl::MutexLock lock(&mu_);
  auto it = partitions_.find(TopicPartition{record.topic, record.partition});
  if (it == partitions_.end()) return;
  if (!it->second.state.Begin(record.offset)) {
    ++counters_.duplicate_records;
    if (stats_ != nullptr) stats_->DuplicateRecord();
    return;
  }
  const absl::Time now = clock_->Now();
  NoteBegunLocked(it->second, record.offset, now);
  ++counters_.poison;
  if (stats_ != nullptr) stats_->PoisonRecord(record.topic);
  QueuedEvent queued;
  queued.bytes = record.ByteSize();
  queued.epoch = it->second.epoch;
  queued.lane = -1;
  queued.processor = -1;
  queued.record_key = record.key;
  queued.queued_at = now;
  queued.event->set_topic(record.topic);
  queued.event->set_partition(record.partition);
  queued.event->set_offset(record.offset);
  queued.event->set_payload(record.payload);
  queued.event->set_timestamp_ms(record.timestamp_ms);
  for (const auto& [name, value] : record.headers) {
    AddEventHeader(queued.event.get(), name, value);
  }
  ++buffered_events_;
  ++it->second.buffered;
  buffered_bytes_ += queued.bytes;
  FailLocked(std::move(queued), absl::StrCat("poison record: ", error));
}

bool Engine::OverHighWatermark() const {
  absl::MutexLock lock(&mu_);
  if (buffered_events_ >= config_.max_buffered_events) return true;
  if (buffered_bytes_ >= config_.max_buffered_bytes) return true;
  if (delayed_.size() >= config_.max_delayed_events) return true;
  return lanes_.any_full();
}

bool Engine::UnderLowWatermark() const {
  absl::MutexLock lock(&mu_);
  const double fraction = config_.resume_fraction;
  if (buffered_events_ > static_cast<int64_t>(config_.max_buffered_events * fraction)) {
    return false;
  }
  if (buffered_bytes_ > static_cast<int64_t>(config_.max_buffered_bytes * fraction)) return false;
  if (delayed_.size() > static_cast<int64_t>(config_.max_delayed_events * fraction)) return false;
  return lanes_.all_drained();
}

int64_t Engine::AddStream(int processor_index, WorkerStream* stream) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_stream_id_++;
  StreamEntry& entry = streams_[id];
  entry.stream = stream;
  entry.processor = processor_index;
  return id;
}

void Engine::OnReady(int64_t stream_id, uint32_t max_in_flight, const std::string& worker_name) {
  SendingLock lock(this);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  StreamEntry& entry = it->second;
  if (entry.resetting) return;
  if (entry.ready) {
    CountProtocolErrorLocked(entry.processor);
    LogWarn("engine", entry.stream->Describe(), " sent Ready twice; ignoring the second");
    return;
  }
  entry.ready = true;
  entry.worker_name = SanitizeWorkerName(worker_name);
  // The worker's credit; Credit messages add to it. Dispatch also keeps the
  // stream under ferry's own cap (processor max_in_flight).
  entry.credit = max_in_flight;
  LogInfo("engine", "stream ready: ", entry.stream->Describe(), " credit=", entry.credit,
          " cap=", config_.processors[entry.processor].max_in_flight);
  DispatchLocked();
}

void Engine::OnCredit(int64_t stream_id, uint32_t credit) {
  SendingLock lock(this);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  StreamEntry& entry = it->second;
  if (entry.resetting) return;
  if (!entry.ready) {
    // README: Results or Credit before Ready reset the stream.
    ProtocolErrorLocked(stream_id, "Credit before Ready");
    return;
  }
  AddCreditLocked(entry, credit);
  DispatchLocked();
}

void Engine::OnResults(int64_t stream_id, const v1::Results& results) {
  SendingLock lock(this);
  auto stream = streams_.find(stream_id);
  if (stream == streams_.end()) {
    counters_.stale_results += results.results_size();  // the stream is gone
    if (stats_ != nullptr) stats_->StaleResults(-1, results.results_size());
    return;
  }
  const int stream_processor = stream->second.processor;
  if (!stream->second.ready || stream->second.resetting) {
    // Nothing was sent before Ready, so none of these ids can be ours; and
    // the events of a stream being reset were already given back.
    counters_.stale_results += results.results_size();
    if (stats_ != nullptr) stats_->StaleResults(stream_processor, results.results_size());
    if (!stream->second.resetting) ProtocolErrorLocked(stream_id, "Results before Ready");
    return;
  }
  const absl::Time now = stats_ != nullptr ? clock_->Now() : absl::InfinitePast();
  for (const v1::Result& result : results.results()) {
    auto it = in_flight_.find(result.id());
    if (it == in_flight_.end() || it->second.stream_id != stream_id) {
      ++counters_.stale_results;
      if (stats_ != nullptr) stats_->StaleResults(stream_processor, 1);
      continue;
    }
    const v1::Result::Status status = result.status();
    if (status != v1::Result::OK && status != v1::Result::RETRY &&
        status != v1::Result::FAIL && status != v1::Result::STATUS_UNSPECIFIED) {
      // A status no version of the protocol defines: the event goes back
      // (not an attempt) and the stream is reset.
      ProtocolErrorLocked(stream_id, absl::StrCat("unknown result status ",
                                                  static_cast<int>(status)));
      DispatchLocked();
      return;
    }
    QueuedEvent queued = std::move(it->second.queued);
    if (stats_ != nullptr) {
      const ResultStatus counted = status == v1::Result::OK      ? ResultStatus::kOk
                                   : status == v1::Result::RETRY ? ResultStatus::kRetry
                                                                 : ResultStatus::kFail;
      stats_->Result(queued.processor, queued.type_index, counted,
                     now - it->second.dispatched_at);
    }
    in_flight_.erase(it);
    --stream->second.in_flight;
    switch (status) {
      case v1::Result::OK:
        ++counters_.acked;
        ReleaseLaneLocked(queued);
        FinishLocked(queued);
        break;
      case v1::Result::RETRY:
        RetryOrFailLocked(std::move(queued), result.retry_after_ms(),
                          result.message().empty() ? std::string("RETRY")
                                                   : SanitizeWorkerMessage(result.message()));
        break;
      default:  // FAIL; an unspecified status counts as FAIL (see the proto)
        ++counters_.failed;
        FailLocked(std::move(queued), result.message().empty()
                                          ? std::string("FAIL (no message)")
                                          : SanitizeWorkerMessage(result.message()));
        break;
    }
  }
  // Results.credit (the worker folds its Credit into the Results message):
  // added after the results so one dispatch serves both.
  if (results.credit() > 0) AddCreditLocked(stream->second, results.credit());
  DispatchLocked();
}

void Engine::RetryOrFailLocked(QueuedEvent queued, uint32_t retry_after_ms,
                               const std::string& error) {
  const ProcessorConfig& processor = config_.processors[queued.processor];
  const int attempt = queued.event->attempt();
  if (attempt < processor.max_attempts) {
    ++counters_.retried;
    queued.event->set_attempt(attempt + 1);
    // The worker's retry_after_ms is honoured up to retry_backoff_max: a
    // worker cannot park a key's lane longer than the operator allows (an
    // answer of 4e9 ms would hold it for 49 days, outside any timeout).
    const absl::Duration asked =
        std::min(absl::Milliseconds(retry_after_ms), processor.retry_backoff_max);
    const absl::Duration delay = std::max(asked, BackoffLocked(processor, attempt));
    // The lane stays busy while it waits, so nothing of its key overtakes it.
    retries_.emplace(clock_->Now() + delay, std::move(queued));
    return;
  }
  ++counters_.failed;
  FailLocked(std::move(queued),
             absl::StrCat("gave up after ", attempt, " attempts: ", error));
}

absl::Duration Engine::BackoffLocked(const ProcessorConfig& processor, int attempt) {
  absl::Duration backoff = processor.retry_backoff;
  for (int i = 1; i < attempt && backoff < processor.retry_backoff_max; ++i) backoff *= 2;
  backoff = std::min(backoff, processor.retry_backoff_max);
  // Jitter in [50%, 100%] so retries of many events spread out.
  return backoff * absl::Uniform(random_, 0.5, 1.0);
}

void Engine::FailLocked(QueuedEvent queued, const std::string& error) {
  const FailurePolicy policy = config_.PolicyFor(queued.processor);
  const std::string where = absl::StrCat(queued.event->topic(), "/", queued.event->partition(),
                                         "@", queued.event->offset());
  if (policy == FailurePolicy::kBlock) {
    // The lane stays busy and the offset unfinished: the partition holds.
    ++counters_.blocked;
    if (stats_ != nullptr) {
      stats_->TerminalFailure(queued.processor, queued.type_index, FailurePolicy::kBlock);
    }
    LogError("engine", "partition ", queued.event->topic(), "/", queued.event->partition(),
             " BLOCKED at offset ", queued.event->offset(), ": ", error,
             " (on_failure: block; skip the offset or change the policy to move on)");
    auto it = partitions_.find(TopicPartition{queued.event->topic(), queued.event->partition()});
    if (it != partitions_.end() && it->second.epoch == queued.epoch) {
      const int64_t offset = queued.event->offset();
      it->second.blocked.emplace(offset, std::move(queued));
      ++blocked_generation_;
    }
    return;
  }
  ReleaseLaneLocked(queued);
  const std::string& topic = config_.DeadLetterTopicFor(queued.processor);
  if (policy == FailurePolicy::kDeadLetter && dead_letters_ != nullptr && !topic.empty()) {
    if (stats_ != nullptr) {
      stats_->TerminalFailure(queued.processor, queued.type_index, FailurePolicy::kDeadLetter);
    }
    int64_t suppressed = 0;
    if (failure_log_limiter_.Allow(clock_->Now(), &suppressed)) {
      LogWarn("engine", "dead-lettering ", where, " to ", topic, ": ", error,
              suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)") : "");
    }
    DeadLetterLocked(std::move(queued), topic, error);
    return;
  }
  if (policy == FailurePolicy::kDeadLetter) {
    // Config validation makes this unreachable; never lose the event quietly.
    LogError("engine", "no dead-letter writer for ", where, "; skipping it: ", error);
  }
  ++counters_.skipped;
  if (stats_ != nullptr) {
    stats_->TerminalFailure(queued.processor, queued.type_index, FailurePolicy::kSkip);
  }
  int64_t suppressed = 0;
  if (failure_log_limiter_.Allow(clock_->Now(), &suppressed)) {
    LogWarn("engine", "skipping failed event ", where, ": ", error,
            suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)") : "");
  }
  FinishLocked(queued);
}

void Engine::DeadLetterLocked(QueuedEvent queued, const std::string& topic,
                              const std::string& error) {
  const uint64_t token = next_dead_letter_token_++;
  PendingDeadLetter& pending = dead_letters_pending_[token];
  DeadLetter& letter = pending.letter;
  letter.dead_letter_topic = topic;
  letter.source_topic = queued.event->topic();
  letter.source_partition = queued.event->partition();
  letter.source_offset = queued.event->offset();
  letter.key = queued.record_key;
  letter.payload = queued.event->payload();
  for (const v1::Header& header : queued.event->headers()) {
    letter.headers.emplace_back(OriginalName(header), header.value());  // as in Kafka
  }
  letter.timestamp_ms = queued.event->timestamp_ms();
  letter.error = error;
  letter.attempts = queued.processor < 0 ? 0 : queued.event->attempt();
  letter.processor = queued.processor < 0 ? "" : config_.processors[queued.processor].name;
  pending.queued = std::move(queued);
  WriteDeadLetterLocked(token);
}

void Engine::WriteDeadLetterLocked(uint64_t token) {
  auto it = dead_letters_pending_.find(token);
  if (it == dead_letters_pending_.end()) return;
  dead_letters_->Write(it->second.letter,
                       [this, token](absl::Status status) { OnDeadLetterWritten(token, status); });
}

void Engine::OnDeadLetterWritten(uint64_t token, absl::Status status) {
  absl::MutexLock lock(&mu_);
  auto it = dead_letters_pending_.find(token);
  if (it == dead_letters_pending_.end()) return;  // its partition was revoked
  if (!status.ok()) {
    ++counters_.dead_letter_errors;
    if (stats_ != nullptr) stats_->DeadLetterError();
    LogWarn("engine", "dead-letter write failed (retrying in ",
            absl::FormatDuration(kDeadLetterRetryBackoff), "): ", status.ToString());
    dead_letter_retries_.emplace(clock_->Now() + kDeadLetterRetryBackoff, token);
    return;
  }
  ++counters_.dead_lettered;
  if (stats_ != nullptr) {
    stats_->DeadLettered(it->second.queued.processor, it->second.queued.type_index);
  }
  FinishLocked(it->second.queued);
  dead_letters_pending_.erase(it);
}

void Engine::OnProtocolError(int64_t stream_id, const std::string& what) {
  SendingLock lock(this);
  ProtocolErrorLocked(stream_id, what);
  DispatchLocked();
}

void Engine::OnStreamClosed(int64_t stream_id, const std::string& why) {
  SendingLock lock(this);
  if (streams_.find(stream_id) == streams_.end()) return;
  RequeueStreamEventsLocked(stream_id, why);
  streams_.erase(stream_id);
  // Messages not yet taken by a sender are dropped (their events were just
  // re-queued); one being sent right now must finish before this returns.
  outbox_.erase(std::remove_if(outbox_.begin(), outbox_.end(),
                               [stream_id](const Outgoing& out) {
                                 return out.stream_id == stream_id;
                               }),
                outbox_.end());
  if (flushing_ && flusher_ == std::this_thread::get_id()) {
    closed_while_flushing_.push_back(stream_id);  // gRPC ran OnDone inside our send
  } else if (flushing_) {
    struct Wait {
      Engine* engine;
      uint64_t round;
    } wait{this, flush_rounds_started_};
    mu_.Await(absl::Condition(
        +[](Wait* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->engine->mu_) {
          return w->engine->flush_rounds_done_ >= w->round;
        },
        &wait));
  }
  DispatchLocked();
}

void Engine::OnTimer() {
  SendingLock lock(this);
  const absl::Time now = clock_->Now();
  bool changed = false;
  std::map<int64_t, std::vector<uint64_t>> cancels;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    QueuedEvent queued = std::move(it->second.queued);
    const int64_t stream_id = it->second.stream_id;
    if (stats_ != nullptr) {
      stats_->Result(queued.processor, queued.type_index, ResultStatus::kTimeout,
                     now - it->second.dispatched_at);
    }
    cancels[stream_id].push_back(it->first);
    in_flight_.erase(it++);
    auto stream = streams_.find(stream_id);
    if (stream != streams_.end()) --stream->second.in_flight;
    ++counters_.timed_out;
    changed = true;
    const ProcessorConfig& processor = config_.processors[queued.processor];
    const std::string error =
        absl::StrCat("timed out after ", absl::FormatDuration(processor.timeout),
                     " (processor ", processor.name, ")");
    if (processor.retry_on_timeout) {
      RetryOrFailLocked(std::move(queued), 0, error);
    } else {
      ++counters_.failed;
      FailLocked(std::move(queued), error);
    }
  }
  for (auto& [stream_id, ids] : cancels) {
    auto stream = streams_.find(stream_id);
    if (stream == streams_.end()) continue;
    Outgoing cancel;
    cancel.stream_id = stream_id;
    cancel.stream = stream->second.stream;
    cancel.cancel = true;
    cancel.ids = std::move(ids);
    outbox_.push_back(std::move(cancel));
  }
  while (!retries_.empty() && retries_.begin()->first <= now) {
    QueuedEvent queued = std::move(retries_.begin()->second);
    retries_.erase(retries_.begin());
    queued.queued_at = now;
    if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
    // A retry was dispatched before: it finishes even while paused.
    EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
    changed = true;
  }
  delayed_.PopDue(now, [this, now, &changed](QueuedEvent&& queued) {
    // Called by PopDue, within this call: mu_ is held. (Through a template the
    // analysis cannot carry a lambda's lock requirement; AssertHeld states it.)
    mu_.AssertHeld();
    queued.queued_at = now;  // the enqueue time counts from when it was due
    EnqueueLocked(std::move(queued), /*front=*/false);
    changed = true;
  });
  while (!dead_letter_retries_.empty() && dead_letter_retries_.begin()->first <= now) {
    const uint64_t token = dead_letter_retries_.begin()->second;
    dead_letter_retries_.erase(dead_letter_retries_.begin());
    WriteDeadLetterLocked(token);
  }
  if (changed) DispatchLocked();
}

std::vector<TopicPartition> Engine::BlockedPartitions() const {
  absl::MutexLock lock(&mu_);
  std::vector<TopicPartition> blocked;
  for (const auto& [tp, entry] : partitions_) {
    if (!entry.blocked.empty()) blocked.push_back(tp);
  }
  return blocked;
}

uint64_t Engine::BlockedGeneration() const { return blocked_generation_.load(); }

std::vector<CommitPosition> Engine::PendingCommits() const {
  absl::MutexLock lock(&mu_);
  std::vector<CommitPosition> positions;
  for (const auto& [tp, entry] : partitions_) {
    const std::optional<int64_t> offset = entry.state.CommitOffset();
    if (offset.has_value() && offset != entry.last_committed) {
      positions.push_back({tp, *offset, entry.epoch});
    }
  }
  return positions;
}

void Engine::MarkCommitted(const std::vector<CommitPosition>& positions) {
  absl::MutexLock lock(&mu_);
  for (const CommitPosition& position : positions) {
    auto it = partitions_.find(position.partition);
    if (it != partitions_.end() && it->second.epoch == position.epoch) {
      it->second.last_committed = position.offset;
    }
  }
}

std::vector<CommitPosition> Engine::StillCurrent(
    const std::vector<CommitPosition>& positions) const {
  absl::MutexLock lock(&mu_);
  std::vector<CommitPosition> current;
  for (const CommitPosition& position : positions) {
    auto it = partitions_.find(position.partition);
    if (it != partitions_.end() && it->second.epoch == position.epoch) current.push_back(position);
  }
  return current;
}

int64_t Engine::Buffered() const {
  absl::MutexLock lock(&mu_);
  return buffered_events_;
}

int64_t Engine::Drainable() const {
  absl::MutexLock lock(&mu_);
  // A blocked partition cannot commit past its held offset, so none of its
  // events is worth waiting for.
  std::set<std::pair<std::string, int32_t>> blocked;
  for (const auto& [tp, entry] : partitions_) {
    if (!entry.blocked.empty()) blocked.emplace(tp.topic, tp.partition);
  }
  auto counts = [&blocked](const v1::Event& event) {
    return blocked.empty() || blocked.count({event.topic(), event.partition()}) == 0;
  };
  int64_t drainable = 0;
  for (const auto& [id, flight] : in_flight_) drainable += counts(*flight.queued.event) ? 1 : 0;
  for (const auto& [token, pending] : dead_letters_pending_) {
    drainable += counts(*pending.queued.event) ? 1 : 0;
  }
  return drainable;
}

EngineSnapshot Engine::Snapshot() const {
  absl::MutexLock lock(&mu_);
  EngineSnapshot snapshot;
  snapshot.counters = counters_;
  snapshot.buffered_events = buffered_events_;
  snapshot.buffered_bytes = buffered_bytes_;
  snapshot.in_flight = static_cast<int64_t>(in_flight_.size());
  snapshot.processors.resize(config_.processors.size());
  for (const auto& [id, stream] : streams_) {
    if (stream.ready) ++snapshot.connected_streams;
    if (stream.processor < 0 || static_cast<size_t>(stream.processor) >= config_.processors.size()) {
      continue;
    }
    ProcessorSnapshot& processor = snapshot.processors[static_cast<size_t>(stream.processor)];
    if (stream.ready) {
      ++processor.connected_streams;
      processor.credit += std::max<int64_t>(0, stream.credit);
    }
    processor.in_flight += stream.in_flight;
    snapshot.streams.push_back(
        {id, stream.processor, stream.ready, std::max<int64_t>(0, stream.credit), stream.in_flight,
         stream.worker_name});
  }
  std::map<TopicPartition, int64_t> in_flight_by_partition;
  for (const auto& [id, flight] : in_flight_) {
    ++in_flight_by_partition[TopicPartition{flight.queued.event->topic(),
                                            flight.queued.event->partition()}];
  }
  for (const auto& [tp, entry] : partitions_) {
    PartitionSnapshot partition;
    partition.partition = tp;
    partition.commit_offset = entry.state.CommitOffset();
    partition.lowest_unfinished = entry.state.LowestUnfinished();
    partition.pending = entry.state.Pending();
    partition.last_committed = entry.last_committed;
    partition.start_offset = entry.start_offset;
    if (partition.lowest_unfinished.has_value()) {
      for (const auto& [offset, since] : entry.begun) {
        if (offset < *partition.lowest_unfinished) continue;
        if (offset == *partition.lowest_unfinished) partition.oldest_unfinished_since = since;
        break;
      }
    }
    partition.buffered = entry.buffered;
    auto flying = in_flight_by_partition.find(tp);
    partition.in_flight = flying != in_flight_by_partition.end() ? flying->second : 0;
    partition.blocked = !entry.blocked.empty();
    partition.paused = entry.paused;
    partition.parked = static_cast<int64_t>(entry.parked.size());
    snapshot.blocked_events += static_cast<int64_t>(entry.blocked.size());
    snapshot.partitions.push_back(std::move(partition));
  }
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    const int64_t size = static_cast<int64_t>(lanes_.size(lane));
    snapshot.queued_events += size;
    snapshot.longest_lane = std::max(snapshot.longest_lane, size);
    if (size > 0 || lanes_.busy(lane)) ++snapshot.lanes_in_use;
  }
  for (const auto& queue : unordered_) snapshot.queued_events += static_cast<int64_t>(queue.size());
  for (const auto& queue : quarantine_) snapshot.queued_events += static_cast<int64_t>(queue.size());
  snapshot.delay_stage_events = delayed_.size();
  snapshot.delayed_events = static_cast<int64_t>(retries_.size()) + delayed_.size();
  snapshot.dead_letters_pending = static_cast<int64_t>(dead_letters_pending_.size());
  return snapshot;
}

void Engine::EnqueueLocked(QueuedEvent queued, bool front, bool even_if_paused) {
  if (paused_partitions_ > 0 && !even_if_paused) {
    auto it = partitions_.find(TopicPartition{queued.event->topic(), queued.event->partition()});
    if (it != partitions_.end() && it->second.paused) {
      if (front) {
        it->second.parked.push_front(std::move(queued));
      } else {
        it->second.parked.push_back(std::move(queued));
      }
      return;
    }
  }
  if (queued.lane < 0) {
    auto& queue = unordered_[QueueIndex(queued.processor, queued.flow)];
    if (front) {
      queue.push_front(std::move(queued));
    } else {
      queue.push_back(std::move(queued));
    }
    return;
  }
  const int lane = queued.lane;
  if (front) {
    lanes_.PushFront(lane, std::move(queued));
  } else {
    lanes_.PushBack(lane, std::move(queued));
  }
  MarkLaneReadyLocked(lane);
}

void Engine::MarkLaneReadyLocked(int lane) {
  if (lane_marked_ready_[lane] || lanes_.busy(lane) || lanes_.empty(lane)) return;
  lane_marked_ready_[lane] = true;
  // With one processor the head's processor is known without touching the
  // head (a cache miss per dispatch across thousands of lanes).
  const int processor = config_.processors.size() == 1 ? 0 : lanes_.Front(lane).processor;
  ready_lanes_[QueueIndex(processor, lane / config_.lane_count)].push_back(lane);
}

void Engine::ReleaseLaneLocked(const QueuedEvent& queued) {
  if (queued.lane < 0) return;
  lanes_.RemoveInFlight(queued.lane);
  MarkLaneReadyLocked(queued.lane);
}

void Engine::FinishLocked(const QueuedEvent& queued) {
  --buffered_events_;
  buffered_bytes_ -= queued.bytes;
  auto it = partitions_.find(TopicPartition{queued.event->topic(), queued.event->partition()});
  if (it != partitions_.end() && it->second.epoch == queued.epoch) {
    PartitionEntry& entry = it->second;
    entry.state.Done(queued.event->offset());
    --entry.buffered;
    // Forget the consumption times of offsets now committable.
    const std::optional<int64_t> lowest = entry.state.LowestUnfinished();
    while (!entry.begun.empty() && (!lowest.has_value() || entry.begun.front().first < *lowest)) {
      entry.begun.pop_front();
    }
  }
}

void Engine::NoteBegunLocked(PartitionEntry& entry, int64_t offset, absl::Time now) {
  // Begin() accepts rising offsets only, so the deque stays in offset order.
  entry.begun.emplace_back(offset, now);
  if (!entry.start_offset.has_value()) entry.start_offset = offset;
}

void Engine::StopDispatching() {
  absl::MutexLock lock(&mu_);
  dispatching_stopped_ = true;
}

void Engine::DispatchLocked() {
  if (dispatching_stopped_) return;
  const absl::Time now = clock_->Now();
  for (size_t processor = 0; processor < config_.processors.size(); ++processor) {
    const ProcessorConfig& processor_config = config_.processors[processor];
    // Events whose streams keep being lost go first, each to a stream of its
    // own (core/engine/redelivery.h).
    DispatchQuarantinedLocked(static_cast<int>(processor), now);
    // Whether flow `flow` may have an event for this processor.
    // has_work and take run inside scheduler_.Next, within this call: mu_ is
    // held (AssertHeld states it where the analysis cannot follow a template).
    auto has_work = [this, processor](int flow) {
      mu_.AssertHeld();
      const size_t queue = QueueIndex(static_cast<int>(processor), flow);
      return !ready_lanes_[queue].empty() || !unordered_[queue].empty();
    };
    bool any_work = false;
    for (int flow = 0; flow < plan_.flow_count() && !any_work; ++flow) any_work = has_work(flow);
    if (!any_work) continue;
    // The next event of flow `flow`: a ready lane's head, else the head of
    // its unordered queue.
    auto take = [this, processor](int flow) -> std::optional<QueuedEvent> {
      mu_.AssertHeld();
      const size_t queue = QueueIndex(static_cast<int>(processor), flow);
      auto& ready = ready_lanes_[queue];
      while (!ready.empty()) {
        const int lane = ready.front();
        ready.pop_front();
        lane_marked_ready_[lane] = false;
        if (lanes_.busy(lane) || lanes_.empty(lane)) continue;
        if (config_.processors.size() > 1 &&
            static_cast<size_t>(lanes_.Front(lane).processor) != processor) {
          MarkLaneReadyLocked(lane);  // its head now belongs to another processor
          continue;
        }
        QueuedEvent taken = lanes_.PopFront(lane);
        lanes_.AddInFlight(lane);
        return taken;
      }
      auto& unordered = unordered_[queue];
      if (unordered.empty()) return std::nullopt;
      QueuedEvent taken = std::move(unordered.front());
      unordered.pop_front();
      return taken;
    };

    // Streams of this processor with credit, starting after the one used
    // last so load spreads round-robin.
    const int64_t cap = processor_config.max_in_flight;
    auto has_room = [this, cap](const StreamEntry& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stream.ready && stream.credit > 0 && stream.in_flight < cap && !stream.reserved &&
             !HoldsQuarantinedLocked(stream);
    };
    std::vector<int64_t>& candidates = candidates_;
    candidates.clear();
    for (auto& [id, stream] : streams_) {
      if (static_cast<size_t>(stream.processor) == processor && has_room(stream)) {
        candidates.push_back(id);
      }
    }
    if (candidates.empty()) continue;
    std::rotate(candidates.begin(),
                std::upper_bound(candidates.begin(), candidates.end(),
                                 last_stream_used_[processor]),
                candidates.end());

    // The Events message being filled per stream (one entry per stream that
    // got events in this call; a handful at most), serialized as it grows.
    struct Batch {
      int64_t stream_id = 0;
      WorkerStream* stream = nullptr;
      EventsWire events;
    };
    std::vector<Batch> batches;
    auto batch_for = [this, &batches](int64_t stream_id)
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> Batch& {
      for (Batch& batch : batches) {
        if (batch.stream_id == stream_id) return batch;
      }
      batches.emplace_back();
      batches.back().stream_id = stream_id;
      batches.back().stream = streams_[stream_id].stream;
      return batches.back();
    };
    auto flush = [this](Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (batch.events.count == 0) return;
      Outgoing out;
      out.stream_id = batch.stream_id;
      out.stream = batch.stream;
      out.events = std::move(batch.events);
      batch.events = EventsWire();
      outbox_.push_back(std::move(out));
    };

    size_t next = 0;
    while (!candidates.empty()) {
      // Next event: by priority class and flow (core/engine/scheduler.h).
      std::optional<QueuedEvent> taken =
          scheduler_.Next(static_cast<int>(processor), has_work, take);
      if (!taken.has_value()) break;

      if (next >= candidates.size()) next = 0;
      const int64_t stream_id = candidates[next];
      StreamEntry& stream = streams_[stream_id];
      // An event redelivered after a lost stream travels alone
      // (core/engine/redelivery.h).
      const bool alone = taken->strikes > 0;
      const v1::Event& event = StartDeliveryLocked(std::move(*taken), stream_id, stream, now);
      const size_t event_size = event.ByteSizeLong();
      Batch* batch = &batch_for(stream_id);
      if (alone || static_cast<int64_t>(batch->events.bytes.size() + event_size) +
                           kEventFraming >
                       processor_config.max_batch_bytes) {
        flush(*batch);
      }
      AppendEventWire(event, event_size, &batch->events);
      if (alone) {
        batch->events.alone = true;
        flush(*batch);
      }
      last_stream_used_[processor] = stream_id;
      if (batch->events.count >= processor_config.max_batch) flush(*batch);
      if (!has_room(stream)) {
        flush(*batch);
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(next));
      } else {
        ++next;
      }
    }
    for (Batch& batch : batches) flush(batch);
  }
}

const v1::Event& Engine::StartDeliveryLocked(QueuedEvent queued, int64_t stream_id,
                                             StreamEntry& stream, absl::Time now) {
  const absl::Duration timeout = config_.processors[queued.processor].timeout;
  const uint64_t id = MakeDeliveryId(queued.epoch, next_delivery_id_++);
  queued.event->set_id(id);
  queued.event->set_deadline_ms(absl::ToUnixMillis(now + timeout));
  if (stats_ != nullptr) {
    stats_->Dispatched(queued.processor, queued.type_index, now - queued.queued_at,
                       queued.redelivery);
  }
  queued.redelivery = false;
  InFlight& flight = in_flight_[id];
  flight.queued = std::move(queued);
  flight.stream_id = stream_id;
  flight.deadline = now + timeout;
  flight.dispatched_at = now;
  --stream.credit;
  ++stream.in_flight;
  ++counters_.dispatched;
  return *flight.queued.event;
}

}  // namespace ferry
