// Engine: the facade (intake, assignment, commits, status). The rest of the
// facade is in engine_control.cc (operator commands), engine_results.cc
// (results, timers, failures) and engine_streams.cc (worker streams).
#include "core/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/common/worker_text.h"
#include "core/engine/engine_stats.h"
#include "core/engine/event_prefetch.h"
#include "core/engine/events_wire.h"

namespace ferry {

void Engine::FlushOutboxAndUnlock() {
  // What this call deferred reaches the metrics before anyone else holds
  // mu_ (EngineStats::DeferDispatched, DeferResult).
  if (stats_ != nullptr) stats_->Flush();
  // One sender at a time keeps each stream's messages in the order they were
  // queued; a thread that finds another sending leaves its messages to it.
  if (flushing_ || outbox_.empty()) {
    mu_.Unlock();
    return;
  }
  flushing_ = true;
  flusher_ = std::this_thread::get_id();
  std::vector<Outbox::Outgoing> round;
  while (!outbox_.empty()) {
    outbox_.TakeAll(round);
    ++flush_rounds_started_;
    mu_.Unlock();
    for (Outbox::Outgoing& out : round) {
      if (!closed_while_flushing_.empty() &&
          std::find(closed_while_flushing_.begin(), closed_while_flushing_.end(),
                    out.stream_id) != closed_while_flushing_.end()) {
        continue;  // its OnDone ran inline in one of our sends
      }
      out.Send();
    }
    round.clear();
    mu_.Lock();
    ++flush_rounds_done_;
  }
  closed_while_flushing_.clear();
  flushing_ = false;
  mu_.Unlock();
}

void Engine::AwaitSendsLocked(int64_t stream_id) {
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
}

Engine::Engine(const Config& config, const Clock* clock, DeadLetterWriter* dead_letters,
               EngineStats* stats)
    : config_(config),
      clock_(clock),
      dead_letter_writer_(dead_letters),
      stats_(stats),
      router_(config_),
      plan_(config_),
      partitions_(&blocked_generation_),
      budget_(config_),
      queues_(config_, plan_),
      scheduler_(plan_, static_cast<int>(config_.processors.size())),
      dispatcher_(config_, plan_.flow_count(), stats),
      streams_(config_.processors.size()),
      dead_letters_(dead_letters, [this](uint64_t token, absl::Status status) {
        OnDeadLetterWritten(token, std::move(status));
      }),
      guards_(config_, clock_->Now()) {}

void Engine::DispatchLocked() {
  if (dispatching_stopped_) return;
  dispatcher_.Run({queues_, scheduler_, streams_, in_flight_, outbox_, counters_, guards_},
                  clock_->Now());
}

void Engine::EnqueueLocked(QueuedEvent queued, bool front, bool even_if_paused) {
  if (!even_if_paused && partitions_.ParkIfPaused(queued, front)) return;
  queues_.Enqueue(std::move(queued), front);
}

void Engine::FinishLocked(const QueuedEvent& queued) {
  budget_.Release(queued.bytes);
  partitions_.Finish(queued);
}

void Engine::StopDispatching() {
  absl::MutexLock lock(&mu_);
  dispatching_stopped_ = true;
}

// ---- Kafka side ----

void Engine::OnAssigned(const std::vector<TopicPartition>& partitions) {
  absl::MutexLock lock(&mu_);
  for (const TopicPartition& tp : partitions) partitions_.Assign(tp);
}

std::vector<CommitPosition> Engine::OnRevoked(const std::vector<TopicPartition>& partitions) {
  SendingLock lock(this);
  std::vector<CommitPosition> positions;
  std::set<TopicPartition> revoked;
  for (const TopicPartition& tp : partitions) {
    if (partitions_.Find(tp) == nullptr) continue;
    revoked.insert(tp);
    std::optional<CommitPosition> position = partitions_.CommitPositionOf(tp);
    if (position.has_value()) positions.push_back(*position);
  }
  if (revoked.empty()) return positions;
  DropWorkLocked(revoked);
  for (const TopicPartition& tp : revoked) partitions_.Erase(tp);
  queues_.MarkAllLanesReady();
  DispatchLocked();
  return positions;
}

void Engine::Submit(v1::Event event, int64_t bytes, std::optional<std::string> record_key) {
  SendingLock lock(this);
  SubmitMemo memo;
  SubmitLocked(std::make_unique<v1::Event>(std::move(event)), bytes, std::move(record_key),
               clock_->Now(), memo);
  FlushSubmitMemo(memo);
  DispatchLocked();
}

void Engine::SubmitBatch(std::vector<SubmitItem>& items,
                         std::vector<std::unique_ptr<v1::Event>>* spares) {
  if (items.empty()) return;
  SendingLock lock(this);
  const absl::Time now = clock_->Now();
  SubmitMemo memo;
  // A round is up to ~1k records, decoded one by one before this: its first
  // Events left the cache while the last were decoded. Each record's
  // submission reads its Event and all its string objects (lookup, route,
  // wire size), so they are asked for a few records ahead (event_prefetch.h).
  constexpr size_t kEventAhead = 6;
  constexpr size_t kStringsAhead = 3;
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kEventAhead < n) PrefetchEvent(*items[i + kEventAhead].event);
    if (i + kStringsAhead < n) PrefetchEventStrings(*items[i + kStringsAhead].event);
    SubmitItem& item = items[i];
    SubmitLocked(std::move(item.event), item.bytes, std::move(item.record_key), now, memo);
  }
  FlushSubmitMemo(memo);
  if (spares != nullptr && spares->size() < items.size()) {
    event_pool_.TakeInto(items.size() - spares->size(), spares);
  }
  DispatchLocked();
}

Engine::Headroom Engine::Room() const {
  absl::MutexLock lock(&mu_);
  return budget_.Room(delayed_.size());
}

void Engine::RouteLocked(const v1::Event& event, SubmitMemo& memo) {
  if (memo.routed && event.type() == memo.type && event.topic() == memo.topic) return;
  FlushSubmitMemo(memo);  // the consumed count is per topic
  memo.topic = event.topic();
  memo.type = event.type();
  memo.processor = router_.ProcessorFor(memo.type);
  memo.type_index = stats_ != nullptr ? stats_->TypeIndex(memo.type) : 0;
  memo.route = plan_.RouteFor(memo.topic, memo.type);
  memo.ordering = router_.OrderingFor(memo.topic);
  memo.routed = true;
}

void Engine::FlushSubmitMemo(SubmitMemo& memo) {
  if (memo.consumed_records == 0) return;
  if (stats_ != nullptr) {
    stats_->RecordsConsumed(memo.topic, memo.consumed_records, memo.consumed_bytes);
  }
  memo.consumed_records = 0;
  memo.consumed_bytes = 0;
}

void Engine::SubmitLocked(std::unique_ptr<v1::Event> event, int64_t bytes,
                          std::optional<std::string> record_key, absl::Time now,
                          SubmitMemo& memo) {
  PartitionTable::Entry* entry = partitions_.Find(event->topic(), event->partition());
  if (entry == nullptr) {
    // A record of a partition no longer assigned: its new owner reads it.
    ++counters_.dropped_on_revoke;
    if (stats_ != nullptr) stats_->DroppedOnRevoke(1);
    return;
  }
  if (!partitions_.Begin(*entry, event->offset(), now)) {
    ++counters_.duplicate_records;  // already being processed in this assignment
    if (stats_ != nullptr) stats_->DuplicateRecord();
    return;
  }
  ++counters_.submitted;
  budget_.Add(bytes);
  RouteLocked(*event, memo);
  ++memo.consumed_records;
  memo.consumed_bytes += bytes;

  event->set_attempt(1);
  QueuedEvent queued(std::move(event));
  queued.bytes = bytes;
  queued.epoch = entry->epoch;
  queued.processor = memo.processor;
  queued.record_key = std::move(record_key);
  queued.type_index = memo.type_index;
  queued.queued_at = now;
  queued.unstamped_size = UnstampedWireSize(*queued.event);
  if (queued.processor < 0) {
    ++counters_.failed;
    queued.lane = -1;
    const std::string type = queued.event->type();
    FailLocked(std::move(queued),
               absl::StrCat("no processor handles event type \"", type,
                            "\" (add it to a processor's event_types, or add a \"*\" processor)"));
    return;
  }
  const SchedulingPlan::Route& route = memo.route;
  queued.flow = route.flow;
  queued.lane = queues_.LaneFor(memo.ordering, route.flow, *queued.event);
  if (route.delay > absl::ZeroDuration()) {
    // Due at event time + delay. The event time is the record timestamp,
    // but never later than now (a record stamped in the future by a skewed
    // clock waits at most the delay), and now for a record without one.
    const int64_t timestamp_ms = queued.event->timestamp_ms();
    const absl::Time event_time =
        timestamp_ms > 0 ? std::min(absl::FromUnixMillis(timestamp_ms), now) : now;
    const absl::Time due = event_time + route.delay;
    const DelayStage<QueuedEvent>::Key key{queued.event->topic(), queued.event->partition(),
                                           route.delay};
    if (delayed_.MustHold(key, due, now)) {
      delayed_.Push(key, due, std::move(queued));
      return;
    }
  }
  EnqueueLocked(std::move(queued), /*front=*/false);
}

void Engine::SubmitPoison(const RawRecord& record, const std::string& error) {
  absl::MutexLock lock(&mu_);
  PartitionTable::Entry* entry = partitions_.Find(TopicPartition{record.topic, record.partition});
  if (entry == nullptr) return;
  const absl::Time now = clock_->Now();
  if (!partitions_.Begin(*entry, record.offset, now)) {
    ++counters_.duplicate_records;
    if (stats_ != nullptr) stats_->DuplicateRecord();
    return;
  }
  ++counters_.poison;
  if (stats_ != nullptr) stats_->PoisonRecord(record.topic);
  QueuedEvent queued = PoisonEvent(record, entry->epoch, now);
  budget_.Add(queued.bytes);
  FailLocked(std::move(queued), absl::StrCat("poison record: ", error));
}

bool Engine::OverHighWatermark() const {
  absl::MutexLock lock(&mu_);
  return budget_.OverHighWatermark(delayed_.size(), queues_.any_lane_full());
}

bool Engine::UnderLowWatermark() const {
  absl::MutexLock lock(&mu_);
  return UnderLowWatermarkLocked();
}

bool Engine::AwaitUnderLowWatermark(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &Engine::UnderLowWatermarkLocked), timeout);
}

bool Engine::UnderLowWatermarkLocked() const {
  return budget_.UnderLowWatermark(delayed_.size(), queues_.all_lanes_drained());
}

// ---- Worker side ----

int64_t Engine::AddStream(int processor_index, WorkerStream* stream) {
  absl::MutexLock lock(&mu_);
  return streams_.Add(processor_index, stream);
}

void Engine::OnReady(int64_t stream_id, uint32_t max_in_flight, const std::string& worker_name,
                     uint32_t max_run) {
  SendingLock lock(this);
  StreamTable::Entry* entry = streams_.Find(stream_id);
  if (entry == nullptr || entry->resetting) return;
  if (entry->ready) {
    CountProtocolErrorLocked(entry->processor);
    LogWarn("engine", entry->stream->Describe(), " sent Ready twice; ignoring the second");
    return;
  }
  entry->ready = true;
  entry->worker_name = SanitizeWorkerName(worker_name);
  // The worker's credit; Credit messages add to it. Dispatch also keeps the
  // stream under ferry's own cap (processor max_in_flight).
  entry->credit = max_in_flight;
  entry->max_run = max_run;
  LogInfo("engine", "stream ready: ", entry->stream->Describe(), " credit=", entry->credit,
          " cap=", config_.processors[entry->processor].max_in_flight, " max_run=", max_run);
  DispatchLocked();
}

void Engine::OnCredit(int64_t stream_id, uint32_t credit) {
  SendingLock lock(this);
  StreamTable::Entry* entry = streams_.Find(stream_id);
  if (entry == nullptr || entry->resetting) return;
  if (!entry->ready) {
    // README: Results or Credit before Ready reset the stream.
    ProtocolErrorLocked(stream_id, "Credit before Ready");
    return;
  }
  AddCreditLocked(*entry, credit);
  DispatchLocked();
}

// ---- Blocks and commits ----

std::vector<TopicPartition> Engine::BlockedPartitions() const {
  absl::MutexLock lock(&mu_);
  return partitions_.BlockedPartitions();
}

uint64_t Engine::BlockedGeneration() const { return blocked_generation_.load(); }

std::vector<CommitPosition> Engine::PendingCommits() const {
  absl::MutexLock lock(&mu_);
  return partitions_.PendingCommits();
}

void Engine::MarkCommitted(const std::vector<CommitPosition>& positions) {
  absl::MutexLock lock(&mu_);
  partitions_.MarkCommitted(positions);
}

std::vector<CommitPosition> Engine::StillCurrent(
    const std::vector<CommitPosition>& positions) const {
  absl::MutexLock lock(&mu_);
  return partitions_.StillCurrent(positions);
}

// ---- Status ----

int64_t Engine::Buffered() const {
  absl::MutexLock lock(&mu_);
  return budget_.events();
}

int64_t Engine::Drainable() const {
  absl::MutexLock lock(&mu_);
  // A blocked partition cannot commit past its held offset, so none of its
  // events is worth waiting for.
  std::set<std::pair<std::string, int32_t>> blocked;
  for (const TopicPartition& tp : partitions_.BlockedPartitions()) {
    blocked.emplace(tp.topic, tp.partition);
  }
  auto counts = [&blocked](const v1::Event& event) {
    return blocked.empty() || blocked.count({event.topic(), event.partition()}) == 0;
  };
  return in_flight_.CountIf(counts) + dead_letters_.CountIf(counts);
}

EngineSnapshot Engine::Snapshot() const {
  absl::MutexLock lock(&mu_);
  EngineSnapshot snapshot;
  snapshot.counters = counters_;
  snapshot.buffered_events = budget_.events();
  snapshot.buffered_bytes = budget_.bytes();
  snapshot.in_flight = in_flight_.size();
  snapshot.processors.resize(config_.processors.size());
  streams_.AddToSnapshot(&snapshot);
  const absl::Time now = clock_->Now();
  for (size_t p = 0; p < snapshot.processors.size(); ++p) {
    guards_.Fill(static_cast<int>(p), now, &snapshot.processors[p]);
  }
  partitions_.AddToSnapshot(in_flight_.CountByPartition(), &snapshot);
  queues_.AddToSnapshot(&snapshot);
  snapshot.delay_stage_events = delayed_.size();
  snapshot.delayed_events = retries_.size() + delayed_.size();
  snapshot.dead_letters_pending = dead_letters_.size();
  return snapshot;
}

}  // namespace ferry
