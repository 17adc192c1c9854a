// Engine: results from workers, the timer (deadlines, retries, delays, dead
// letter rewrites), retries and terminal failures. See core/engine/engine.h.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/common/prefetch.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"
#include "core/engine/event_prefetch.h"
#include "core/engine/results.h"
#include "core/engine/runs.h"

namespace ferry {
namespace {

// Results come back for events consumed long before: their Events, strings
// and partition-state slots are cold (core/engine/event_prefetch.h).
void PrefetchResultEvents(InFlightTable& in_flight, PartitionTable& partitions,
                          int64_t stream_id, const v1::Results& results) {
  absl::InlinedVector<const QueuedEvent*, 64> finished;
  absl::InlinedVector<const v1::Event*, 64> events;
  for (const v1::Result& result : results.results()) {
    const InFlightTable::Delivery* delivery = in_flight.Find(result.id(), stream_id);
    if (delivery == nullptr) continue;
    finished.push_back(&delivery->queued);
    events.push_back(delivery->queued.event.get());
  }
  PrefetchEvents(events, kCacheLine);
  // The offset's slot in its partition's state, which finishing marks done.
  for (const QueuedEvent* queued : finished) partitions.PrefetchFinish(*queued);
}

}  // namespace

void Engine::OnResults(int64_t stream_id, const v1::Results& results) {
  SendingLock lock(this);
  StreamTable::Entry* stream = streams_.Find(stream_id);
  if (stream == nullptr) {
    counters_.stale_results += results.results_size();  // the stream is gone
    if (stats_ != nullptr) stats_->StaleResults(-1, results.results_size());
    return;
  }
  if (!stream->ready || stream->resetting) {
    // Nothing was sent before Ready, so none of these ids can be ours; and
    // the events of a stream being reset were already given back.
    counters_.stale_results += results.results_size();
    if (stats_ != nullptr) stats_->StaleResults(stream->processor, results.results_size());
    if (!stream->resetting) ProtocolErrorLocked(stream_id, "Results before Ready");
    return;
  }
  const absl::Time now = stats_ != nullptr ? clock_->Now() : absl::InfinitePast();
  if (results.results_size() > 1) {
    PrefetchResultEvents(in_flight_, partitions_, stream_id, results);
  }
  for (const v1::Result& result : results.results()) {
    if (!ApplyResultLocked(stream_id, *stream, result, now)) {
      DispatchLocked();
      return;
    }
  }
  // Results.credit (the worker folds its Credit into the Results message):
  // added after the results so one dispatch serves both.
  if (results.credit() > 0) AddCreditLocked(*stream, results.credit());
  DispatchLocked();
}

bool Engine::ApplyResultLocked(int64_t stream_id, StreamTable::Entry& stream,
                               const v1::Result& result, absl::Time now) {
  InFlightTable::Delivery* delivery = in_flight_.Find(result.id(), stream_id);
  if (delivery == nullptr) {
    ++counters_.stale_results;
    if (stats_ != nullptr) stats_->StaleResults(stream.processor, 1);
    return true;
  }
  ResultOutcome outcome = ClassifyResult(result.status());
  if (outcome == ResultOutcome::kNotAttempted && !TreatAsNotAttempted(delivery->queued)) {
    outcome = ResultOutcome::kRetry;  // nothing before it in a run could have stopped it
  }
  if (outcome == ResultOutcome::kUnknown) {
    // A status no version of the protocol defines: the event goes back
    // (not an attempt) and the stream is reset.
    ProtocolErrorLocked(stream_id, absl::StrCat("unknown result status ",
                                                static_cast<int>(result.status())));
    return false;
  }
  if (stats_ != nullptr) {
    const ResultStatus counted =
        outcome == ResultOutcome::kOk             ? ResultStatus::kOk
        : outcome == ResultOutcome::kRetry        ? ResultStatus::kRetry
        : outcome == ResultOutcome::kNotAttempted ? ResultStatus::kNotAttempted
                                                  : ResultStatus::kFail;
    stats_->DeferResult(delivery->queued.processor, delivery->queued.type_index, counted,
                        now - delivery->dispatched_at);
  }
  const absl::Time dispatched_at = delivery->dispatched_at;
  QueuedEvent queued = in_flight_.Take(result.id()).queued;
  --stream.in_flight;
  if (outcome != ResultOutcome::kNotAttempted && guards_.active(queued.processor)) {
    const DownstreamGuards::Outcome guarded = outcome == ResultOutcome::kOk
                                                  ? DownstreamGuards::Outcome::kOk
                                              : outcome == ResultOutcome::kRetry
                                                  ? DownstreamGuards::Outcome::kRetry
                                                  : DownstreamGuards::Outcome::kFail;
    if (GuardOutcomeLocked(queued, guarded, dispatched_at, now)) {
      SpareLocked(std::move(queued), now);
      return true;
    }
  }
  switch (outcome) {
    case ResultOutcome::kOk:
      ++counters_.acked;
      queues_.ReleaseLane(queued);
      FinishLocked(queued);
      {
        // Kept while the budget has room for it: the consumer refills that
        // room, and each record it reads needs an Event (event_pool.h).
        const IntakeBudget::Headroom room = budget_.Room(delayed_.size());
        event_pool_.Recycle(std::move(queued.event), EventPool::Limit{room.events, room.bytes});
      }
      break;
    case ResultOutcome::kRetry:
      RetryOrFailLocked(std::move(queued), result.retry_after_ms(), ResultError(result, outcome));
      break;
    case ResultOutcome::kNotAttempted:
      GiveBackLocked(std::move(queued), now);
      break;
    default:
      ++counters_.failed;
      FailLocked(std::move(queued), ResultError(result, outcome));
      break;
  }
  return true;
}

void Engine::OnTimer() {
  SendingLock lock(this);
  const absl::Time now = clock_->Now();
  bool changed = ExpireLocked(now);
  retries_.PopDue(now, [this, now, &changed](QueuedEvent queued) {
    // Called by PopDue, within this call: mu_ is held. (Through a callback the
    // analysis cannot carry a lock requirement; AssertHeld states it.)
    mu_.AssertHeld();
    queued.queued_at = now;
    queues_.ReturnLaneSlot(queued);
    // A retry was dispatched before: it finishes even while paused.
    EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
    changed = true;
  });
  delayed_.PopDue(now, [this, now, &changed](QueuedEvent&& queued) {
    mu_.AssertHeld();  // as above
    queued.queued_at = now;  // the enqueue time counts from when it was due
    EnqueueLocked(std::move(queued), /*front=*/false);
    changed = true;
  });
  dead_letters_.RewriteDue(now);
  // Rate-limit tokens and breaker probes come with time, not with events.
  if (changed || guards_.any_time_based()) DispatchLocked();
}

bool Engine::GuardOutcomeLocked(const QueuedEvent& queued, DownstreamGuards::Outcome outcome,
                                absl::Time dispatched_at, absl::Time now) {
  if (now == absl::InfinitePast()) now = clock_->Now();  // OnResults reads it only with stats
  return guards_.OnOutcome(queued.processor, outcome, now - dispatched_at,
                           streams_.InFlightOf(queued.processor), now);
}

void Engine::SpareLocked(QueuedEvent queued, absl::Time now) {
  if (now == absl::InfinitePast()) now = clock_->Now();
  ++counters_.breaker_spared;
  queued.redelivery = true;  // not an attempt
  queued.queued_at = now;
  queues_.ReturnLaneSlot(queued);
  // It was dispatched: it finishes even while paused, like a retry.
  EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
}

void Engine::GiveBackLocked(QueuedEvent queued, absl::Time now) {
  ++counters_.not_attempted;
  queued.redelivery = true;  // not an attempt
  queued.queued_at = now;
  queues_.ReturnLaneSlot(queued);
  // It was dispatched: it finishes even while paused, like a retry.
  EnqueueLocked(std::move(queued), /*front=*/true, /*even_if_paused=*/true);
}

void Engine::CancelRunsAfterLocked(const std::map<uint64_t, int>& first_expired,
                                   std::map<int64_t, std::vector<uint64_t>>* cancels,
                                   absl::Time now) {
  auto later_member = [&first_expired](const QueuedEvent& queued) {
    if (queued.run_id == 0) return false;
    auto it = first_expired.find(queued.run_id);
    return it != first_expired.end() && queued.run_position > it->second;
  };
  std::vector<InFlightTable::Delivery> later;
  in_flight_.RemoveIf(later_member, [&later](InFlightTable::Delivery&& delivery) {
    later.push_back(std::move(delivery));
  });
  for (InFlightTable::Delivery& delivery : later) {
    (*cancels)[delivery.stream_id].push_back(delivery.queued.event->id());
    streams_.EventLeft(delivery.stream_id);
    if (stats_ != nullptr) {
      stats_->Result(delivery.queued.processor, delivery.queued.type_index,
                     ResultStatus::kNotAttempted, now - delivery.dispatched_at);
    }
    GiveBackLocked(std::move(delivery.queued), now);
  }
}

bool Engine::ExpireLocked(absl::Time now) {
  std::vector<std::pair<uint64_t, InFlightTable::Delivery>> expired = in_flight_.TakeExpired(now);
  if (expired.empty()) return false;
  std::map<int64_t, std::vector<uint64_t>> cancels;
  // Per run, the first member that timed out: the ones after it are not
  // attempted, whether they expired too or are still in flight.
  std::map<uint64_t, int> first_expired;
  for (const auto& [id, delivery] : expired) {
    const QueuedEvent& queued = delivery.queued;
    if (queued.run_id == 0) continue;
    auto [it, added] = first_expired.emplace(queued.run_id, queued.run_position);
    if (!added) it->second = std::min(it->second, queued.run_position);
  }
  for (auto& [id, delivery] : expired) {
    QueuedEvent queued = std::move(delivery.queued);
    if (queued.run_id != 0 && queued.run_position > first_expired[queued.run_id]) {
      cancels[delivery.stream_id].push_back(id);
      streams_.EventLeft(delivery.stream_id);
      if (stats_ != nullptr) {
        stats_->Result(queued.processor, queued.type_index, ResultStatus::kNotAttempted,
                       now - delivery.dispatched_at);
      }
      GiveBackLocked(std::move(queued), now);
      continue;
    }
    if (stats_ != nullptr) {
      stats_->Result(queued.processor, queued.type_index, ResultStatus::kTimeout,
                     now - delivery.dispatched_at);
    }
    cancels[delivery.stream_id].push_back(id);
    streams_.EventLeft(delivery.stream_id);
    ++counters_.timed_out;
    if (guards_.active(queued.processor) &&
        GuardOutcomeLocked(queued, DownstreamGuards::Outcome::kTimeout, delivery.dispatched_at,
                           now)) {
      SpareLocked(std::move(queued), now);
      continue;
    }
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
  if (!first_expired.empty()) CancelRunsAfterLocked(first_expired, &cancels, now);
  for (auto& [stream_id, ids] : cancels) {
    StreamTable::Entry* stream = streams_.Find(stream_id);
    if (stream != nullptr) outbox_.PushCancel(stream_id, stream->stream, std::move(ids));
  }
  return true;
}

void Engine::RetryOrFailLocked(QueuedEvent queued, uint32_t retry_after_ms,
                               const std::string& error) {
  const ProcessorConfig& processor = config_.processors[queued.processor];
  const int attempt = queued.event->attempt();
  if (attempt < processor.max_attempts) {
    ++counters_.retried;
    queued.event->set_attempt(attempt + 1);
    const absl::Duration delay = retries_.Delay(processor, attempt, retry_after_ms);
    // The lane stays busy while it waits, so nothing of its key overtakes it.
    retries_.Schedule(clock_->Now() + delay, std::move(queued));
    return;
  }
  ++counters_.failed;
  FailLocked(std::move(queued), absl::StrCat("gave up after ", attempt, " attempts: ", error));
}

void Engine::FailLocked(QueuedEvent queued, const std::string& error) {
  const FailureDecision decision =
      ResolveFailure(config_, queued.processor, dead_letter_writer_ != nullptr);
  const std::string where = absl::StrCat(queued.event->topic(), "/", queued.event->partition(),
                                         "@", queued.event->offset());
  if (stats_ != nullptr) {
    stats_->TerminalFailure(queued.processor, queued.type_index, decision.action);
  }
  switch (decision.action) {
    case FailurePolicy::kBlock:
      // The lane stays busy and the offset unfinished: the partition holds.
      ++counters_.blocked;
      LogError("engine", "partition ", queued.event->topic(), "/", queued.event->partition(),
               " BLOCKED at offset ", queued.event->offset(), ": ", error,
               " (on_failure: block; skip the offset or change the policy to move on)");
      partitions_.Block(std::move(queued));
      return;
    case FailurePolicy::kDeadLetter:
      queues_.ReleaseLane(queued);
      LogFailureLocked(
          absl::StrCat("dead-lettering ", where, " to ", decision.dead_letter_topic, ": ", error));
      DeadLetterLocked(std::move(queued), decision.dead_letter_topic, error);
      return;
    case FailurePolicy::kSkip:
      queues_.ReleaseLane(queued);
      if (decision.dead_letter_unavailable) {
        // Config validation makes this unreachable; never lose the event quietly.
        LogError("engine", "no dead-letter writer for ", where, "; skipping it: ", error);
      }
      ++counters_.skipped;
      LogFailureLocked(absl::StrCat("skipping failed event ", where, ": ", error));
      FinishLocked(queued);
      return;
  }
}

void Engine::LogFailureLocked(const std::string& line) {
  int64_t suppressed = 0;
  if (failure_log_limiter_.Allow(clock_->Now(), &suppressed)) {
    LogWarn("engine", line,
            suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)") : "");
  }
}

void Engine::DeadLetterLocked(QueuedEvent queued, const std::string& topic,
                              const std::string& error) {
  DeadLetter letter = MakeDeadLetter(config_, queued, topic, error);
  dead_letters_.Start(std::move(queued), std::move(letter));
}

void Engine::OnDeadLetterWritten(uint64_t token, absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (!dead_letters_.pending(token)) return;  // its partition was revoked
  if (!status.ok()) {
    ++counters_.dead_letter_errors;
    if (stats_ != nullptr) stats_->DeadLetterError();
    LogWarn("engine", "dead-letter write failed (retrying in ",
            absl::FormatDuration(DeadLetterTracker::kRetryBackoff), "): ", status.ToString());
    dead_letters_.RetryLater(token, clock_->Now());
    return;
  }
  ++counters_.dead_lettered;
  const QueuedEvent queued = dead_letters_.Acknowledge(token);
  if (stats_ != nullptr) stats_->DeadLettered(queued.processor, queued.type_index);
  FinishLocked(queued);
}

}  // namespace ferry
