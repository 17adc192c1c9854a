// Engine: the heart of ferry. It owns every consumed-but-unfinished event and
// decides what is dispatched to which worker stream, what is committable, and
// when fetching must pause.
//
//   Submit() ──► PartitionState.Begin ──► Lanes ──► Dispatch ──► WorkerStream
//   OnResults() ──► PartitionState.Done ──► TakeCommits() ──► Kafka commit
//
// Rules it keeps:
//   * An offset is committable only when it and every lower offset of its
//     partition that ferry received reached a terminal result.
//   * KEY/PARTITION ordering: at most one event of a lane is in flight; the
//     next leaves only after the previous one's terminal result. Except in a
//     run (core/engine/runs.h), for a worker that set Ready.max_run > 1: up
//     to max_run consecutive events of the lane in one message, handled in
//     order by the worker; the lane stays busy until all are answered, and
//     members answered NOT_ATTEMPTED (after one that did not end OK) go back
//     to the head of the lane without counting an attempt.
//   * A stream never has more events outstanding than its worker granted.
//   * Results apply once: unknown, stale (revoked partition) or duplicate ids
//     are dropped and counted. Delivery ids carry the partition's assignment
//     epoch in their top 24 bits.
//   * Scheduling (core/engine/scheduler.h): each (topic, priority class) is a flow
//     with its own lanes; free credit goes to classes by weighted
//     round-robin and to the flows of a class round-robin.
//   * Delays (core/engine/delay_stage.h): an event of a topic with a delay waits in
//     the delay stage until its record timestamp + delay (OnTimer releases
//     it); a full delay stage pauses fetching like a full budget.
//   * RETRY waits out an exponential backoff (with jitter, at least the
//     worker's retry_after) at the head of its lane, up to max_attempts.
//   * A lost stream's in-flight events are redelivered (not an attempt), a
//     bounded number of times: core/engine/redelivery.h (events lost twice are
//     quarantined, one per stream). A worker that breaks the protocol
//     (OnProtocolError, Results or Credit before Ready, an unknown status)
//     has its stream reset. Worker strings are sanitized (core/common/worker_text.h).
//   * A terminal failure follows its policy: dlq (done only once the dead
//     letter is acknowledged), skip (done now), block (its partition holds
//     until an operator acts).
//
// Metrics: with an EngineStats (core/engine/engine_stats.h) the engine counts
// consumed records, dispatches, results, failures and their timings as they
// happen (atomic counters and histograms, under the engine mutex); state
// gauges come from Snapshot().
//
// Components (core/engine/README.md): the Engine is the facade that holds the
// one mutex and the outbox and coordinates plain single-threaded components,
// each guarded by that mutex: PartitionTable (assignment, fencing, pause,
// blocks, commits), EventRouter and IntakeBudget (intake), WorkQueues (lanes,
// unordered queues, quarantine), Scheduler, Dispatcher, StreamTable (streams
// and credit), InFlightTable, RetryQueue, DelayStage, DeadLetterTracker
// (failure policy), DownstreamGuards (rate limits, adaptive concurrency,
// circuit breakers) and Outbox.
//
// Threading: every public method is thread-safe (one internal mutex).
// Messages for WorkerStreams (Events, Cancel) are queued in an outbox under
// that mutex and sent after it is released, by one thread at a time and in
// the order they were queued, so serialization and gRPC writes never hold the
// engine. OnStreamClosed returns only once no send to that stream is running.
// WorkerStream implementations must not block or call back into the engine.
#ifndef FERRY_CORE_ENGINE_ENGINE_H_
#define FERRY_CORE_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/common/log.h"
#include "core/config/config.h"
#include "core/engine/dead_letter.h"
#include "core/engine/delay_stage.h"
#include "core/engine/dispatcher.h"
#include "core/engine/downstream_guard.h"
#include "core/engine/event_pool.h"
#include "core/engine/event_router.h"
#include "core/engine/failure_policy.h"
#include "core/engine/in_flight_table.h"
#include "core/engine/intake.h"
#include "core/engine/intake_budget.h"
#include "core/engine/outbox.h"
#include "core/engine/partition_table.h"
#include "core/engine/queued_event.h"
#include "core/engine/retry_queue.h"
#include "core/engine/scheduler.h"
#include "core/engine/stream_table.h"
#include "core/engine/types.h"
#include "core/engine/work_queues.h"
#include "core/engine/worker_stream.h"
#include "core/kafka/record.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

class EngineStats;

class Engine {
 public:
  // `dead_letters` may be null when no policy uses a dead-letter topic;
  // `stats` may be null (no metrics). Both must outlive the engine.
  Engine(const Config& config, const Clock* clock, DeadLetterWriter* dead_letters = nullptr,
         EngineStats* stats = nullptr);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- Kafka side (the consumer's poll thread) ----
  void OnAssigned(const std::vector<TopicPartition>& partitions);
  // Drops queued and in-flight work of these partitions (late results become
  // stale) and returns their final committable positions, to commit now.
  std::vector<CommitPosition> OnRevoked(const std::vector<TopicPartition>& partitions);
  // Accepts a decoded event (id, attempt and deadline are set here).
  // `bytes` is its weight against the byte budget; `record_key` is the
  // record's own key (for a dead letter, which keeps the original record).
  void Submit(v1::Event event, int64_t bytes,
              std::optional<std::string> record_key = std::nullopt);
  // A batch of decoded events (one consume batch), accepted in order under one
  // lock with one dispatch at the end. Exactly like Submit() per item.
  // The event is held by pointer so it moves into the engine's QueuedEvent
  // without a copy or a swap of its fields.
  struct SubmitItem {
    std::unique_ptr<v1::Event> event;
    int64_t bytes = 0;
    std::optional<std::string> record_key;
  };
  // With `spares`, it also hands back up to items.size() finished Events,
  // cleared, for the consumer to decode the next records into (EventPool):
  // `spares` then holds at most items.size() events.
  void SubmitBatch(std::vector<SubmitItem>& items,
                   std::vector<std::unique_ptr<v1::Event>>* spares = nullptr);
  // How much more the consumer may hand over before a budget is reached:
  // events (against max_buffered_events and max_delayed_events) and bytes.
  using Headroom = IntakeBudget::Headroom;
  Headroom Room() const;
  // A record that cannot become an event (undecodable, oversize): it takes
  // the failure policy (dead letter, skip or block) at once.
  void SubmitPoison(const RawRecord& record, const std::string& error);

  // Backpressure: true when buffered events or bytes reached their budget
  // (or a lane or the delay stage is full); the consumer pauses fetching.
  bool OverHighWatermark() const;
  // True when both budgets fell under resume_fraction; the consumer resumes.
  bool UnderLowWatermark() const;
  // Waits until UnderLowWatermark() or `timeout`; returns which. The
  // consumer waits here while it holds records back (absl re-checks the
  // condition whenever another thread releases the engine's lock).
  bool AwaitUnderLowWatermark(absl::Duration timeout) const;

  // ---- Worker side (gRPC reactor threads) ----
  // Registers a stream of processor `processor_index` (index into
  // Config::processors). No event is sent before OnReady.
  int64_t AddStream(int processor_index, WorkerStream* stream);
  // `worker_name` is what the worker calls itself (shown in GetStatus); it is
  // stored sanitized (core/common/worker_text.h), like Result messages.
  // `max_run` is Ready.max_run: above 1, ordered lanes may send it runs
  // (core/engine/runs.h).
  void OnReady(int64_t stream_id, uint32_t max_in_flight, const std::string& worker_name = "",
               uint32_t max_run = 0);
  void OnCredit(int64_t stream_id, uint32_t credit);
  // Applies the results, then the credit they carry (Results.credit), then
  // dispatches once.
  void OnResults(int64_t stream_id, const v1::Results& results);
  // The stream is gone: its in-flight events go back to the front of their
  // lanes (a redelivery, not a failed attempt; bounded, core/engine/redelivery.h).
  // `why` (sanitized by the caller) names the cause in the error of an event
  // that reaches the redelivery limit. After this returns the engine never
  // touches `stream` again.
  void OnStreamClosed(int64_t stream_id, const std::string& why = "");
  // The stream sent something that breaks the protocol (e.g. bytes that do
  // not parse as a ProcessResponse; `what` says which, sanitized by the
  // caller): counted, logged (rate-limited), its in-flight events are
  // redelivered, nothing more is dispatched to it and it is reset. Later
  // traffic from it is ignored.
  void OnProtocolError(int64_t stream_id, const std::string& what);

  // Asks for a stream to be reset (closed and reopened) after the worker
  // broke the protocol; implemented by the WorkerPool.
  using StreamResetter = std::function<void(WorkerStream*)>;

  // ---- Timers (the committer thread) ----
  // Expires deliveries whose deadline passed (Cancel is sent; the event is a
  // terminal failure, or a retry with retry_on_timeout), re-queues retries
  // whose backoff is over and releases delayed events that are due.
  void OnTimer();

  // ---- Operator control (the consumer's poll thread) ----
  // The partitions an operator paused (the whole set; partitions assigned
  // later start paused when in it). Queued events of a paused partition are
  // set aside and not dispatched; in-flight events and retries finish and
  // commit. Resuming queues the set-aside events again in their order.
  void SetPaused(const std::set<TopicPartition>& paused);
  // Offset reset: drops every queued, in-flight, retrying and held event of
  // the partition (late results become stale) and starts a new epoch, so the
  // next record accepted may have any offset. The caller seeks and commits.
  void ResetPartition(const TopicPartition& partition);
  // Gives up on one stuck event (in flight, retrying or held by a `block`
  // failure): its worker gets a Cancel, and the event goes to the dead-letter
  // topic when one is configured ("dead_lettered"), else it is marked done
  // ("marked_done"). FailedPrecondition when the offset is not in one of
  // those states on this replica.
  absl::StatusOr<std::string> SkipOffset(const TopicPartition& partition, int64_t offset);

  // Operators' rate limits (group-wide, from the control log), by processor
  // name: the whole set. A processor not in it goes back to its configured
  // processors[].rate_limit; a RateLimitConfig with events_per_second 0
  // lifts the limit. Names of no configured processor are ignored.
  void SetRateLimits(const std::map<std::string, RateLimitConfig>& overrides);

  // Partitions held by a `block` failure; the consumer pauses them.
  std::vector<TopicPartition> BlockedPartitions() const;
  // Changes whenever the blocked set changes (cheap to poll).
  uint64_t BlockedGeneration() const;

  // ---- Committer ----
  // Positions that advanced since they were last marked committed.
  std::vector<CommitPosition> PendingCommits() const;
  void MarkCommitted(const std::vector<CommitPosition>& positions);
  // The positions whose partition is still assigned under the same epoch
  // (a position computed before a revoke must not be committed after it).
  std::vector<CommitPosition> StillCurrent(const std::vector<CommitPosition>& positions) const;

  // Shutdown: no new dispatches from now on, not even a RETRY's next
  // attempt or a redelivery (in-flight events may still finish). Called when
  // the drain starts: what has not reached a worker stays uncommitted and the
  // partition's next owner delivers it.
  void StopDispatching();

  // ---- Status ----
  // Events consumed and not finished (queued, delayed or in flight).
  int64_t Buffered() const;
  // What the shutdown drain waits for: events a worker has (in flight) and
  // dead letters being written, of partitions that no `block` failure holds
  // (a held partition cannot commit past it). Queued, retrying and delayed
  // events are not counted: after StopDispatching they never leave, and the
  // next owner reads them again.
  int64_t Drainable() const;
  EngineSnapshot Snapshot() const;

 private:
  // Locks mu_; on destruction sends what the outbox holds (see Threading).
  class SendingLock;
  friend class SendingLock;
  // Sends the outbox with mu_ held on entry; returns with mu_ released.
  void FlushOutboxAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);
  // Waits until no send to a stream taken from the outbox before now runs.
  void AwaitSendsLocked(int64_t stream_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Intake (engine.cc) ----
  // What one consume batch looks up once instead of once per event: the
  // routing of the last (topic, type) seen and the consumed-records count
  // not yet added to the topic's metrics (SubmitLocked, FlushSubmitMemo).
  struct SubmitMemo {
    std::string topic;
    std::string type;
    bool routed = false;  // processor..ordering hold for (topic, type)
    int processor = 0;
    int type_index = 0;
    SchedulingPlan::Route route;
    Ordering ordering = Ordering::kKey;
    int64_t consumed_records = 0;  // of `topic`, not yet in the metrics
    int64_t consumed_bytes = 0;
  };
  void SubmitLocked(std::unique_ptr<v1::Event> event, int64_t bytes,
                    std::optional<std::string> record_key, absl::Time now, SubmitMemo& memo)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Routes `event` through the memo (looked up again when its topic or type
  // differs from the last one's).
  void RouteLocked(const v1::Event& event, SubmitMemo& memo) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushSubmitMemo(SubmitMemo& memo) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Into its lane (or unordered queue); set aside instead when its partition
  // is paused, unless `even_if_paused` (a retry of a dispatched event).
  void EnqueueLocked(QueuedEvent queued, bool front, bool even_if_paused = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event reached a terminal result: finish its offset, free its budget.
  void FinishLocked(const QueuedEvent& queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Operator commands and dropping work (engine_control.cc) ----
  // Drops all work of these partitions (revoke, reset); returns how many
  // events were dropped.
  int64_t DropWorkLocked(const std::set<TopicPartition>& partitions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ParkLocked(const std::set<TopicPartition>& newly_paused) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the stuck event at `offset` (held, in flight, retrying or
  // quarantined) for SkipOffset; a Cancel goes to its worker when in flight.
  std::optional<QueuedEvent> TakeStuckLocked(PartitionTable::Entry& entry,
                                             const TopicPartition& tp, int64_t offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool UnderLowWatermarkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Results, retries, failures (engine_results.cc) ----
  // Applies one result of a stream's; false when it broke the protocol (the
  // stream is being reset and the rest must not be applied).
  bool ApplyResultLocked(int64_t stream_id, StreamTable::Entry& stream, const v1::Result& result,
                         absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expires deliveries whose deadline passed; true when any did.
  bool ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A run member the worker did not handle (NOT_ATTEMPTED, or cancelled
  // with an earlier member that timed out): back to the head of its lane,
  // after the earlier members of its run, without counting an attempt
  // (core/engine/runs.h). It left its stream already.
  void GiveBackLocked(QueuedEvent queued, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expired run members take the later members of their runs with them:
  // removes those from the in-flight table, adds their ids to `cancels` and
  // gives them back.
  void CancelRunsAfterLocked(const std::map<uint64_t, int>& first_expired,
                             std::map<int64_t, std::vector<uint64_t>>* cancels, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the processor's guards an outcome (core/engine/downstream_guard.h);
  // true when the failed event must be spared: given back (no attempt, no
  // dead letter) because the processor's circuit breaker is not closed.
  bool GuardOutcomeLocked(const QueuedEvent& queued, DownstreamGuards::Outcome outcome,
                          absl::Time dispatched_at, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A failed event spared by the circuit breaker: back to the head of its
  // lane without an attempt. It left its stream already.
  void SpareLocked(QueuedEvent queued, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RETRY (or a retried timeout): backoff at the head of its lane, or a
  // terminal failure once attempts are used up.
  void RetryOrFailLocked(QueuedEvent queued, uint32_t retry_after_ms, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A terminal failure: applies the policy (dead letter, skip or block). The
  // lane must already be released (except for block, which keeps it).
  void FailLocked(QueuedEvent queued, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the event to `topic`; it is finished once Kafka acknowledges. The
  // caller has released its lane.
  void DeadLetterLocked(QueuedEvent queued, const std::string& topic, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDeadLetterWritten(uint64_t token, absl::Status status);
  void LogFailureLocked(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Worker streams (engine_streams.cc) ----
  // The worker broke the protocol: its in-flight events go back (redelivery)
  // and the stream is reset.
  void ProtocolErrorLocked(int64_t stream_id, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the stream's in-flight events back for redelivery, charging them
  // (core/engine/redelivery.h); those past the limit take the failure policy with
  // an error naming `why`, the stream's loss.
  void RequeueStreamEventsLocked(int64_t stream_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountProtocolErrorLocked(int processor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddCreditLocked(StreamTable::Entry& entry, uint32_t credit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Config config_;
  const Clock* const clock_;
  DeadLetterWriter* const dead_letter_writer_;
  EngineStats* const stats_;
  const EventRouter router_;
  const SchedulingPlan plan_;

  // Bumped by partitions_ (under mu_) whenever the blocked set changes; read
  // without mu_ (BlockedGeneration).
  std::atomic<uint64_t> blocked_generation_{0};
  mutable absl::Mutex mu_;
  PartitionTable partitions_ ABSL_GUARDED_BY(mu_);
  IntakeBudget budget_ ABSL_GUARDED_BY(mu_);
  WorkQueues queues_ ABSL_GUARDED_BY(mu_);
  // Which flow a processor's next credit goes to.
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  Dispatcher dispatcher_ ABSL_GUARDED_BY(mu_);
  // Events waiting for record timestamp + delay.
  DelayStage<QueuedEvent> delayed_ ABSL_GUARDED_BY(mu_);
  InFlightTable in_flight_ ABSL_GUARDED_BY(mu_);
  // Events acked OK, kept for the consumer's next records (SubmitBatch).
  EventPool event_pool_ ABSL_GUARDED_BY(mu_);
  StreamTable streams_ ABSL_GUARDED_BY(mu_);
  // Retries waiting out their backoff (their lanes stay busy meanwhile).
  RetryQueue retries_ ABSL_GUARDED_BY(mu_);
  DeadLetterTracker dead_letters_ ABSL_GUARDED_BY(mu_);
  // Rate limits, adaptive concurrency and circuit breakers per processor.
  // Mutable: a snapshot reads a breaker's state, which time moves from open
  // to half-open.
  mutable DownstreamGuards guards_ ABSL_GUARDED_BY(mu_);
  EngineCounters counters_ ABSL_GUARDED_BY(mu_);
  bool dispatching_stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Failures can come once per record: at most 20 lines per 10 s.
  LogRateLimiter failure_log_limiter_ ABSL_GUARDED_BY(mu_){20, absl::Seconds(10)};
  // A hostile worker can break the protocol on every reconnect.
  LogRateLimiter protocol_log_limiter_ ABSL_GUARDED_BY(mu_){20, absl::Seconds(10)};
  // Messages for streams, sent after mu_ is released (FlushOutboxAndUnlock).
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
  // Whether a thread is sending the outbox, which one, and how many rounds
  // (outbox takes) it started and finished.
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id flusher_ ABSL_GUARDED_BY(mu_);
  uint64_t flush_rounds_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flush_rounds_done_ ABSL_GUARDED_BY(mu_) = 0;
  // Streams closed by the flushing thread itself while it sends (gRPC ran
  // OnDone inline): written and read only on that thread.
  std::vector<int64_t> closed_while_flushing_;
  StreamResetter stream_resetter_;

 public:
  // Installed once by the WorkerPool before any stream opens.
  void SetStreamResetter(StreamResetter resetter) { stream_resetter_ = std::move(resetter); }
};

// Locks the engine's mutex; on destruction sends what the outbox holds and
// unlocks (Engine::FlushOutboxAndUnlock).
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

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_ENGINE_H_
