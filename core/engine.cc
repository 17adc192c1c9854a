#include "core/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace ferry {

std::string TopicPartition::ToString() const { return absl::StrCat(topic, "/", partition); }

Engine::Engine(const Config& config, const Clock* clock)
    : config_(config),
      clock_(clock),
      lanes_(config.lane_count, config.lane_capacity),
      ready_lanes_(config.processors.size()),
      lane_marked_ready_(static_cast<size_t>(config.lane_count), false),
      unordered_(config.processors.size()),
      last_stream_used_(config.processors.size(), 0) {
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
    entry.epoch = next_epoch_++;
  }
}

std::vector<CommitPosition> Engine::OnRevoked(const std::vector<TopicPartition>& partitions) {
  absl::MutexLock lock(&mu_);
  std::vector<CommitPosition> positions;
  std::map<TopicPartition, bool> revoked;
  for (const TopicPartition& tp : partitions) {
    auto it = partitions_.find(tp);
    if (it == partitions_.end()) continue;
    revoked[tp] = true;
    if (it->second.state.CommitOffset().has_value()) {
      positions.push_back({tp, *it->second.state.CommitOffset(), it->second.epoch});
    }
  }
  if (revoked.empty()) return positions;
  auto is_revoked = [&revoked](const QueuedEvent& queued) {
    return revoked.count(TopicPartition{queued.event.topic(), queued.event.partition()}) > 0;
  };
  int64_t dropped = 0;
  auto release_budget = [this, &dropped](const QueuedEvent& queued) {
    --buffered_events_;
    buffered_bytes_ -= queued.bytes;
    ++dropped;
  };
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    for (const QueuedEvent& queued : lanes_.RemoveIf(lane, is_revoked)) release_budget(queued);
  }
  for (auto& queue : unordered_) {
    std::deque<QueuedEvent> kept;
    for (QueuedEvent& queued : queue) {
      if (is_revoked(queued)) {
        release_budget(queued);
      } else {
        kept.push_back(std::move(queued));
      }
    }
    queue.swap(kept);
  }
  // In-flight deliveries of revoked partitions are forgotten: a late result
  // finds no id and is counted as stale. The worker still holds them, so the
  // stream's credit is not given back here.
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (is_revoked(it->second.queued)) {
      auto stream = streams_.find(it->second.stream_id);
      if (stream != streams_.end()) --stream->second.in_flight;
      ReleaseLaneLocked(it->second.queued);
      release_budget(it->second.queued);
      in_flight_.erase(it++);
    } else {
      ++it;
    }
  }
  for (const auto& [tp, unused] : revoked) partitions_.erase(tp);
  counters_.dropped_on_revoke += dropped;
  for (int lane = 0; lane < lanes_.count(); ++lane) MarkLaneReadyLocked(lane);
  DispatchLocked();
  return positions;
}

void Engine::Submit(v1::Event event, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const TopicPartition tp{event.topic(), event.partition()};
  auto it = partitions_.find(tp);
  if (it == partitions_.end()) {
    // A record of a partition no longer assigned: its new owner reads it.
    ++counters_.dropped_on_revoke;
    return;
  }
  if (!it->second.state.Begin(event.offset())) {
    ++counters_.duplicate_records;  // already being processed in this assignment
    return;
  }
  ++counters_.submitted;
  ++buffered_events_;
  buffered_bytes_ += bytes;

  QueuedEvent queued;
  queued.bytes = bytes;
  queued.epoch = it->second.epoch;
  queued.processor = ProcessorFor(event.type());
  event.set_attempt(1);
  queued.event = std::move(event);
  if (queued.processor < 0) {
    ++counters_.failed;
    LogWarn("engine", "no processor handles event type \"", queued.event.type(), "\"; failing ",
            tp.ToString(), "@", queued.event.offset(),
            " (add the type to a processor's event_types or add a \"*\" processor)");
    FinishLocked(queued);
    return;
  }
  const Ordering ordering = OrderingFor(tp.topic);
  queued.lane = ordering == Ordering::kUnordered
                    ? -1
                    : Lanes<QueuedEvent>::LaneFor(ordering, tp.topic, tp.partition,
                                                  queued.event.key(), lanes_.count());
  EnqueueLocked(std::move(queued), /*front=*/false);
  DispatchLocked();
}

void Engine::SubmitPoison(const TopicPartition& partition, int64_t offset,
                          const std::string& error) {
  absl::MutexLock lock(&mu_);
  auto it = partitions_.find(partition);
  if (it == partitions_.end()) return;
  ++counters_.poison;
  LogWarn("engine", "poison record skipped: ", error);
  if (it->second.state.Begin(offset)) it->second.state.Done(offset);
}

bool Engine::OverHighWatermark() const {
  absl::MutexLock lock(&mu_);
  if (buffered_events_ >= config_.max_buffered_events) return true;
  if (buffered_bytes_ >= config_.max_buffered_bytes) return true;
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    if (lanes_.full(lane)) return true;
  }
  return false;
}

bool Engine::UnderLowWatermark() const {
  absl::MutexLock lock(&mu_);
  const double fraction = config_.resume_fraction;
  if (buffered_events_ > static_cast<int64_t>(config_.max_buffered_events * fraction)) {
    return false;
  }
  if (buffered_bytes_ > static_cast<int64_t>(config_.max_buffered_bytes * fraction)) return false;
  const size_t lane_low = static_cast<size_t>(config_.lane_capacity * fraction);
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    if (lanes_.size(lane) > lane_low) return false;
  }
  return true;
}

int64_t Engine::AddStream(int processor_index, WorkerStream* stream) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_stream_id_++;
  StreamEntry& entry = streams_[id];
  entry.stream = stream;
  entry.processor = processor_index;
  return id;
}

void Engine::OnReady(int64_t stream_id, uint32_t max_in_flight) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  StreamEntry& entry = it->second;
  if (entry.ready) {
    LogWarn("engine", entry.stream->Describe(), " sent Ready twice; ignoring the second");
    return;
  }
  entry.ready = true;
  // The worker's credit; Credit messages add to it. Dispatch also keeps the
  // stream under ferry's own cap (processor max_in_flight).
  entry.credit = max_in_flight;
  LogInfo("engine", "stream ready: ", entry.stream->Describe(), " credit=", entry.credit,
          " cap=", config_.processors[entry.processor].max_in_flight);
  DispatchLocked();
}

void Engine::OnCredit(int64_t stream_id, uint32_t credit) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  it->second.credit += credit;
  DispatchLocked();
}

void Engine::OnResults(int64_t stream_id, const v1::Results& results) {
  absl::MutexLock lock(&mu_);
  auto stream = streams_.find(stream_id);
  for (const v1::Result& result : results.results()) {
    auto it = in_flight_.find(result.id());
    if (it == in_flight_.end() || it->second.stream_id != stream_id) {
      ++counters_.stale_results;
      continue;
    }
    QueuedEvent queued = std::move(it->second.queued);
    in_flight_.erase(it);
    if (stream != streams_.end()) --stream->second.in_flight;
    switch (result.status()) {
      case v1::Result::OK:
        ++counters_.acked;
        ReleaseLaneLocked(queued);
        FinishLocked(queued);
        break;
      case v1::Result::RETRY:
        if (queued.event.attempt() < kMaxAttempts) {
          ++counters_.retried;
          queued.event.set_attempt(queued.event.attempt() + 1);
          // Back at the head of its lane, so nothing of its key overtakes it.
          if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
          EnqueueLocked(std::move(queued), /*front=*/true);
          break;
        }
        ++counters_.failed;
        LogWarn("engine", "giving up on ", queued.event.topic(), "/", queued.event.partition(),
                "@", queued.event.offset(), " after ", queued.event.attempt(),
                " attempts: ", result.message());
        ReleaseLaneLocked(queued);
        FinishLocked(queued);
        break;
      default:
        ++counters_.failed;
        LogWarn("engine", "processing failed for ", queued.event.topic(), "/",
                queued.event.partition(), "@", queued.event.offset(), ": ",
                result.message().empty() ? "(no message)" : result.message());
        ReleaseLaneLocked(queued);
        FinishLocked(queued);
        break;
    }
  }
  DispatchLocked();
}

void Engine::OnStreamClosed(int64_t stream_id) {
  absl::MutexLock lock(&mu_);
  auto stream = streams_.find(stream_id);
  if (stream == streams_.end()) return;
  std::vector<QueuedEvent> requeue;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.stream_id == stream_id) {
      requeue.push_back(std::move(it->second.queued));
      in_flight_.erase(it++);
    } else {
      ++it;
    }
  }
  // Lowest offsets first, so pushing each to the front of its lane leaves the
  // lane in offset order.
  std::sort(requeue.begin(), requeue.end(), [](const QueuedEvent& a, const QueuedEvent& b) {
    return a.event.offset() > b.event.offset();
  });
  for (QueuedEvent& queued : requeue) {
    ++counters_.redelivered;
    if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
    EnqueueLocked(std::move(queued), /*front=*/true);
  }
  if (!requeue.empty()) {
    LogWarn("engine", "stream lost: ", stream->second.stream->Describe(), "; ", requeue.size(),
            " in-flight events will be redelivered");
  }
  streams_.erase(stream);
  DispatchLocked();
}

void Engine::ExpireDeadlines() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::map<int64_t, std::vector<uint64_t>> cancels;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    QueuedEvent queued = std::move(it->second.queued);
    const int64_t stream_id = it->second.stream_id;
    cancels[stream_id].push_back(it->first);
    in_flight_.erase(it++);
    auto stream = streams_.find(stream_id);
    if (stream != streams_.end()) --stream->second.in_flight;
    ++counters_.timed_out;
    ++counters_.failed;
    LogWarn("engine", "timed out: ", queued.event.topic(), "/", queued.event.partition(), "@",
            queued.event.offset(), " (processor ", config_.processors[queued.processor].name,
            " timeout ", absl::FormatDuration(config_.processors[queued.processor].timeout), ")");
    ReleaseLaneLocked(queued);
    FinishLocked(queued);
  }
  for (auto& [stream_id, ids] : cancels) {
    auto stream = streams_.find(stream_id);
    if (stream != streams_.end()) stream->second.stream->SendCancel(std::move(ids));
  }
  if (!cancels.empty()) DispatchLocked();
}

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

int64_t Engine::Buffered() const {
  absl::MutexLock lock(&mu_);
  return buffered_events_;
}

EngineSnapshot Engine::Snapshot() const {
  absl::MutexLock lock(&mu_);
  EngineSnapshot snapshot;
  snapshot.counters = counters_;
  snapshot.buffered_events = buffered_events_;
  snapshot.buffered_bytes = buffered_bytes_;
  snapshot.in_flight = static_cast<int64_t>(in_flight_.size());
  for (const auto& [id, stream] : streams_) {
    if (stream.ready) ++snapshot.connected_streams;
  }
  for (const auto& [tp, entry] : partitions_) {
    snapshot.partitions.push_back(
        {tp, entry.state.CommitOffset(), entry.state.LowestUnfinished(), entry.state.Pending()});
  }
  return snapshot;
}

void Engine::EnqueueLocked(QueuedEvent queued, bool front) {
  if (queued.lane < 0) {
    auto& queue = unordered_[queued.processor];
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
  ready_lanes_[lanes_.Front(lane).processor].push_back(lane);
}

void Engine::ReleaseLaneLocked(const QueuedEvent& queued) {
  if (queued.lane < 0) return;
  lanes_.RemoveInFlight(queued.lane);
  MarkLaneReadyLocked(queued.lane);
}

void Engine::FinishLocked(const QueuedEvent& queued) {
  --buffered_events_;
  buffered_bytes_ -= queued.bytes;
  auto it = partitions_.find(TopicPartition{queued.event.topic(), queued.event.partition()});
  if (it != partitions_.end() && it->second.epoch == queued.epoch) {
    it->second.state.Done(queued.event.offset());
  }
}

void Engine::DispatchLocked() {
  const absl::Time now = clock_->Now();
  for (size_t processor = 0; processor < config_.processors.size(); ++processor) {
    const ProcessorConfig& processor_config = config_.processors[processor];
    auto& ready = ready_lanes_[processor];
    auto& unordered = unordered_[processor];
    if (ready.empty() && unordered.empty()) continue;

    // Streams of this processor with credit, starting after the one used
    // last so load spreads round-robin.
    const int64_t cap = processor_config.max_in_flight;
    auto has_room = [cap](const StreamEntry& stream) {
      return stream.ready && stream.credit > 0 && stream.in_flight < cap;
    };
    std::vector<int64_t> candidates;
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

    std::map<int64_t, v1::Events> batches;
    std::map<int64_t, int64_t> batch_bytes;
    auto flush = [this, &batches, &batch_bytes](int64_t stream_id) {
      batch_bytes[stream_id] = 0;
      auto batch = batches.find(stream_id);
      if (batch == batches.end() || batch->second.events_size() == 0) return;
      streams_[stream_id].stream->SendEvents(std::move(batch->second));
      batches.erase(batch);
    };

    size_t next = 0;
    while (!candidates.empty()) {
      // Next event: a ready lane's head, else the unordered queue.
      std::optional<QueuedEvent> taken;
      while (!ready.empty() && !taken.has_value()) {
        const int lane = ready.front();
        ready.pop_front();
        lane_marked_ready_[lane] = false;
        if (lanes_.busy(lane) || lanes_.empty(lane)) continue;
        if (static_cast<size_t>(lanes_.Front(lane).processor) != processor) {
          MarkLaneReadyLocked(lane);  // its head now belongs to another processor
          continue;
        }
        taken = lanes_.PopFront(lane);
        lanes_.AddInFlight(lane);
      }
      if (!taken.has_value() && !unordered.empty()) {
        taken = std::move(unordered.front());
        unordered.pop_front();
      }
      if (!taken.has_value()) break;

      if (next >= candidates.size()) next = 0;
      const int64_t stream_id = candidates[next];
      StreamEntry& stream = streams_[stream_id];
      const uint64_t id = next_delivery_id_++;
      taken->event.set_id(id);
      taken->event.set_deadline_ms(absl::ToUnixMillis(now + processor_config.timeout));
      const int64_t event_bytes = static_cast<int64_t>(taken->event.ByteSizeLong());
      if (batch_bytes[stream_id] + event_bytes > processor_config.max_batch_bytes) {
        flush(stream_id);
      }
      v1::Events& batch = batches[stream_id];
      *batch.add_events() = taken->event;
      batch_bytes[stream_id] += event_bytes;
      InFlight& flight = in_flight_[id];
      flight.queued = std::move(*taken);
      flight.stream_id = stream_id;
      flight.deadline = now + processor_config.timeout;
      --stream.credit;
      ++stream.in_flight;
      ++counters_.dispatched;
      last_stream_used_[processor] = stream_id;
      if (batch.events_size() >= processor_config.max_batch) flush(stream_id);
      if (!has_room(stream)) {
        flush(stream_id);
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(next));
      } else {
        ++next;
      }
    }
    while (!batches.empty()) flush(batches.begin()->first);
  }
}

}  // namespace ferry
