// Engine: what happens to a worker stream's events when the stream breaks
// the protocol or is lost (kept apart from engine.cc, which is already long).
// See core/engine/engine.h for the rules and core/engine/redelivery.h for the bound.
#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"
#include "core/engine/events_wire.h"
#include "core/common/log.h"
#include "core/engine/redelivery.h"

namespace ferry {

void Engine::CountProtocolErrorLocked(int processor) {
  ++counters_.protocol_errors;
  if (stats_ != nullptr) stats_->ProtocolError(processor);
}

void Engine::AddCreditLocked(StreamEntry& entry, uint32_t credit) {
  // Credit beyond any sensible amount is clamped; ferry's own cap still
  // bounds what is outstanding.
  constexpr int64_t kMaxCredit = int64_t{1} << 31;
  entry.credit += credit;
  if (entry.credit > kMaxCredit) {
    CountProtocolErrorLocked(entry.processor);
    entry.credit = kMaxCredit;
  }
}

void Engine::ProtocolErrorLocked(int64_t stream_id, const std::string& what) {
  auto stream = streams_.find(stream_id);
  if (stream == streams_.end() || stream->second.resetting) return;
  StreamEntry& entry = stream->second;
  CountProtocolErrorLocked(entry.processor);
  // A hostile worker breaks the protocol on every reconnect: rate-limited.
  int64_t suppressed = 0;
  if (protocol_log_limiter_.Allow(clock_->Now(), &suppressed)) {
    LogWarn("engine", entry.stream->Describe(), " broke the protocol (", what,
            "); resetting the stream, its events will be redelivered",
            suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)") : "");
  }
  entry.resetting = true;
  entry.reset_reason = absl::StrCat("protocol error: ", what);
  RequeueStreamEventsLocked(stream_id, entry.reset_reason);
  // Nothing more goes to it; it is closed and reopened by the pool.
  entry.ready = false;
  entry.credit = 0;
  if (stream_resetter_) stream_resetter_(entry.stream);
}

void Engine::RequeueStreamEventsLocked(int64_t stream_id, const std::string& why) {
  std::vector<QueuedEvent> requeue;
  bool held_suspects = false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.stream_id == stream_id) {
      held_suspects = held_suspects || it->second.queued.strikes > 0;
      requeue.push_back(std::move(it->second.queued));
      in_flight_.erase(it++);
    } else {
      ++it;
    }
  }
  // Highest offsets first: each goes to the front of its lane, so the lane
  // ends up in offset order.
  std::sort(requeue.begin(), requeue.end(), [](const QueuedEvent& a, const QueuedEvent& b) {
    return a.event->offset() > b.event->offset();
  });
  const absl::Time now = clock_->Now();
  int64_t redelivered = 0;
  for (QueuedEvent& queued : requeue) {
    if (ChargedForLostStream(queued.strikes, held_suspects)) ++queued.strikes;
    if (RedeliveriesExhausted(queued.strikes)) {
      ++counters_.failed;
      ++counters_.redelivery_limit;
      if (stats_ != nullptr) stats_->RedeliveryLimit(queued.processor);
      const std::string error = RedeliveryLimitError(queued.strikes, why);
      FailLocked(std::move(queued), error);  // its lane is released (or held, for block)
      continue;
    }
    ++redelivered;
    ++counters_.redelivered;
    if (stats_ != nullptr) stats_->Redelivered(queued.processor, queued.type_index);
    queued.redelivery = true;
    queued.queued_at = now;
    if (queued.strikes >= kQuarantineStrikes) {
      // Its lane stays busy (nothing of its key overtakes it) while it waits
      // for a stream of its own.
      quarantine_[static_cast<size_t>(queued.processor)].push_back(std::move(queued));
      continue;
    }
    if (queued.lane >= 0) lanes_.RemoveInFlight(queued.lane);
    EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
  }
  auto stream = streams_.find(stream_id);
  if (stream != streams_.end()) {
    if (redelivered > 0) {
      LogWarn("engine", "stream ", stream->second.stream->Describe(), ": ", redelivered,
              " in-flight events will be redelivered");
    }
    stream->second.in_flight = 0;
  }
}

bool Engine::HoldsQuarantinedLocked(const StreamEntry& stream) const {
  // Delivery ids are never reused, so a stale id simply is not found.
  return stream.quarantined_id != 0 && in_flight_.contains(stream.quarantined_id);
}

void Engine::DispatchQuarantinedLocked(int processor, absl::Time now) {
  std::deque<QueuedEvent>& queue = quarantine_[static_cast<size_t>(processor)];
  while (!queue.empty()) {
    int64_t target = 0;
    int64_t to_reserve = 0;
    int64_t fewest = std::numeric_limits<int64_t>::max();
    bool reserved = false;
    for (auto& [id, stream] : streams_) {
      if (stream.processor != processor || !stream.ready || HoldsQuarantinedLocked(stream)) {
        continue;
      }
      reserved = reserved || stream.reserved;
      if (stream.in_flight == 0 && stream.credit > 0) {
        target = id;
        break;
      }
      if (stream.in_flight < fewest) {
        fewest = stream.in_flight;
        to_reserve = id;
      }
    }
    if (target == 0) {
      // No idle stream: drain one (nothing new goes to it) so the event is
      // not starved by fresh work; its results bring the next dispatch here.
      if (!reserved && to_reserve != 0) streams_[to_reserve].reserved = true;
      return;
    }
    StreamEntry& stream = streams_[target];
    stream.reserved = false;
    QueuedEvent queued = std::move(queue.front());
    queue.pop_front();
    const v1::Event& event = StartDeliveryLocked(std::move(queued), target, stream, now);
    stream.quarantined_id = event.id();
    Outgoing out;
    out.stream_id = target;
    out.stream = stream.stream;
    out.events.alone = true;
    AppendEventWire(event, event.ByteSizeLong(), &out.events);
    outbox_.push_back(std::move(out));
  }
}

std::vector<Engine::QueuedEvent> Engine::TakeQuarantinedLocked(
    const std::function<bool(const QueuedEvent&)>& match) {
  std::vector<QueuedEvent> taken;
  for (std::deque<QueuedEvent>& queue : quarantine_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (match(*it)) {
        taken.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  }
  return taken;
}

}  // namespace ferry
