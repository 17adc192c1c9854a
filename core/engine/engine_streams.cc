// Engine: worker streams that break the protocol, are lost or close, and
// what happens to their in-flight events (redelivery, bounded by
// core/engine/redelivery.h). See core/engine/engine.h for the rules.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"
#include "core/engine/redelivery.h"

namespace ferry {

void Engine::CountProtocolErrorLocked(int processor) {
  ++counters_.protocol_errors;
  if (stats_ != nullptr) stats_->ProtocolError(processor);
}

void Engine::AddCreditLocked(StreamTable::Entry& entry, uint32_t credit) {
  // Credit beyond any sensible amount is clamped (and counted); ferry's own
  // cap still bounds what is outstanding.
  if (!StreamTable::AddCredit(entry, credit)) CountProtocolErrorLocked(entry.processor);
}

void Engine::OnProtocolError(int64_t stream_id, const std::string& what) {
  SendingLock lock(this);
  ProtocolErrorLocked(stream_id, what);
  DispatchLocked();
}

void Engine::ProtocolErrorLocked(int64_t stream_id, const std::string& what) {
  StreamTable::Entry* entry = streams_.Find(stream_id);
  if (entry == nullptr || entry->resetting) return;
  CountProtocolErrorLocked(entry->processor);
  // A hostile worker breaks the protocol on every reconnect: rate-limited.
  int64_t suppressed = 0;
  if (protocol_log_limiter_.Allow(clock_->Now(), &suppressed)) {
    LogWarn("engine", entry->stream->Describe(), " broke the protocol (", what,
            "); resetting the stream, its events will be redelivered",
            suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)") : "");
  }
  entry->resetting = true;
  entry->reset_reason = absl::StrCat("protocol error: ", what);
  RequeueStreamEventsLocked(stream_id, entry->reset_reason);
  // Nothing more goes to it; it is closed and reopened by the pool.
  entry->ready = false;
  entry->credit = 0;
  if (stream_resetter_) stream_resetter_(entry->stream);
}

void Engine::OnStreamClosed(int64_t stream_id, const std::string& why) {
  SendingLock lock(this);
  if (streams_.Find(stream_id) == nullptr) return;
  RequeueStreamEventsLocked(stream_id, why);
  streams_.Erase(stream_id);
  // Messages not yet taken by a sender are dropped (their events were just
  // re-queued); one being sent right now must finish before this returns.
  outbox_.DropStream(stream_id);
  AwaitSendsLocked(stream_id);
  DispatchLocked();
}

void Engine::RequeueStreamEventsLocked(int64_t stream_id, const std::string& why) {
  std::vector<QueuedEvent> requeue = in_flight_.TakeStream(stream_id);
  const bool held_suspects = std::any_of(requeue.begin(), requeue.end(),
                                         [](const QueuedEvent& q) { return q.strikes > 0; });
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
      queues_.Quarantine(std::move(queued));
      continue;
    }
    queues_.ReturnLaneSlot(queued);
    EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
  }
  StreamTable::Entry* stream = streams_.Find(stream_id);
  if (stream != nullptr) {
    if (redelivered > 0) {
      LogWarn("engine", "stream ", stream->stream->Describe(), ": ", redelivered,
              " in-flight events will be redelivered");
    }
    stream->in_flight = 0;
  }
}

}  // namespace ferry
