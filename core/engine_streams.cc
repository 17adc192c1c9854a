// Engine: what happens to a worker stream's events when the stream breaks
// the protocol or is lost (kept apart from engine.cc, which is already long).
// See core/engine.h for the rules and core/redelivery.h for the bound.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine.h"
#include "core/engine_stats.h"
#include "core/log.h"
#include "core/redelivery.h"

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

}  // namespace ferry
