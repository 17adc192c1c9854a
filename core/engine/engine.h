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
//     next leaves only after the previous one's terminal result.
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
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/config/config.h"
#include "core/engine/dead_letter.h"
#include "core/engine/delay_stage.h"
#include "core/engine/lanes.h"
#include "core/common/log.h"
#include "core/engine/partition_state.h"
#include "core/kafka/record.h"
#include "core/engine/scheduler.h"
#include "core/engine/worker_stream.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

class EngineStats;

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  bool operator<(const TopicPartition& other) const {
    return topic != other.topic ? topic < other.topic : partition < other.partition;
  }
  bool operator==(const TopicPartition& other) const {
    return topic == other.topic && partition == other.partition;
  }
  std::string ToString() const;
};

// An offset to commit for one partition, tagged with the assignment epoch it
// was computed under so a commit of a since-revoked assignment is recognised.
struct CommitPosition {
  TopicPartition partition;
  int64_t offset = 0;
  uint64_t epoch = 0;
};

struct EngineCounters {
  int64_t submitted = 0;       // events accepted from Kafka
  int64_t poison = 0;          // records that could not be decoded
  int64_t dispatched = 0;      // deliveries sent to workers (incl. redeliveries)
  int64_t acked = 0;           // OK results
  int64_t failed = 0;          // terminal failures (FAIL, attempts exhausted, timeout, unroutable)
  int64_t retried = 0;         // RETRY results that were retried
  int64_t timed_out = 0;       // deliveries whose deadline passed
  int64_t redelivered = 0;     // in-flight events re-queued after a stream was lost
  int64_t stale_results = 0;   // results for unknown, revoked or timed-out ids
  int64_t dropped_on_revoke = 0;
  int64_t duplicate_records = 0;  // records read twice in one assignment, ignored
  int64_t dead_lettered = 0;      // dead letters acknowledged by Kafka
  int64_t dead_letter_errors = 0; // dead-letter writes that failed (and were retried)
  int64_t skipped = 0;            // terminal failures skipped by policy
  int64_t blocked = 0;            // terminal failures holding their partition
  int64_t protocol_errors = 0;    // malformed worker traffic
  int64_t redelivery_limit = 0;   // events failed after too many lost streams (core/engine/redelivery.h)
};

struct PartitionSnapshot {
  TopicPartition partition;
  // The committable position (contiguous finished prefix + 1).
  std::optional<int64_t> commit_offset;
  // The commit blocker: the lowest offset not finished.
  std::optional<int64_t> lowest_unfinished;
  size_t pending = 0;
  // The position last committed to Kafka in this assignment (MarkCommitted).
  std::optional<int64_t> last_committed;
  // The first offset consumed in this assignment.
  std::optional<int64_t> start_offset;
  // When the event at lowest_unfinished was consumed (its age is how long
  // this partition's commits have been held by it).
  std::optional<absl::Time> oldest_unfinished_since;
  int64_t buffered = 0;   // consumed and unfinished (queued, delayed, in flight, held)
  int64_t in_flight = 0;  // at a worker, waiting for its result
  bool blocked = false;   // held by an `on_failure: block` failure
  bool paused = false;    // paused by an operator (SetPaused)
  int64_t parked = 0;     // queued events set aside while paused
};

struct StreamSnapshot {
  int64_t id = 0;
  int processor = 0;  // index into Config::processors
  bool ready = false;
  int64_t credit = 0;
  int64_t in_flight = 0;
  std::string worker_name;
};

struct ProcessorSnapshot {
  int connected_streams = 0;  // streams that sent Ready
  int64_t credit = 0;         // credit granted by the workers and not yet used
  int64_t in_flight = 0;      // events at its workers
};

struct EngineSnapshot {
  EngineCounters counters;
  int64_t buffered_events = 0;
  int64_t buffered_bytes = 0;
  int64_t in_flight = 0;
  int connected_streams = 0;
  std::vector<PartitionSnapshot> partitions;
  // Waiting for dispatch: in lanes plus unordered queues.
  int64_t queued_events = 0;
  // The longest lane's queue.
  int64_t longest_lane = 0;
  // Events waiting for their time: in the delay stage (topics[].delay) or
  // retries waiting out their backoff.
  int64_t delayed_events = 0;
  // Of those, the ones in the delay stage (against max_delayed_events).
  int64_t delay_stage_events = 0;
  // Events held by `block` failures.
  int64_t blocked_events = 0;
  // Dead letters being written.
  int64_t dead_letters_pending = 0;
  // Indexed like Config::processors.
  std::vector<ProcessorSnapshot> processors;
  std::vector<StreamSnapshot> streams;
  // Key lanes holding queued or in-flight events.
  int64_t lanes_in_use = 0;
};

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
  struct SubmitItem {
    v1::Event event;
    int64_t bytes = 0;
    std::optional<std::string> record_key;
  };
  void SubmitBatch(std::vector<SubmitItem>& items);
  // How much more the consumer may hand over before a budget is reached:
  // events (against max_buffered_events and max_delayed_events) and bytes.
  struct Headroom {
    int64_t events = 0;
    int64_t bytes = 0;
  };
  Headroom Room() const;
  // A record that cannot become an event (undecodable, oversize): it takes
  // the failure policy (dead letter, skip or block) at once.
  void SubmitPoison(const RawRecord& record, const std::string& error);

  // Backpressure: true when buffered events or bytes reached their budget
  // (or a lane or the delay stage is full); the consumer pauses fetching.
  bool OverHighWatermark() const;
  // True when both budgets fell under resume_fraction; the consumer resumes.
  bool UnderLowWatermark() const;

  // ---- Worker side (gRPC reactor threads) ----
  // Registers a stream of processor `processor_index` (index into
  // Config::processors). No event is sent before OnReady.
  int64_t AddStream(int processor_index, WorkerStream* stream);
  // `worker_name` is what the worker calls itself (shown in GetStatus); it is
  // stored sanitized (core/common/worker_text.h), like Result messages.
  void OnReady(int64_t stream_id, uint32_t max_in_flight, const std::string& worker_name = "");
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
  struct QueuedEvent {
    // Held by pointer: a queued event moves from lane to dispatch to the
    // in-flight table, and a pointer moves for free where a message does not.
    // Never null except in a moved-from QueuedEvent.
    std::unique_ptr<v1::Event> event = std::make_unique<v1::Event>();
    int64_t bytes = 0;
    uint64_t epoch = 0;
    int lane = 0;
    int processor = 0;
    int flow = 0;  // (topic, priority class): see core/engine/scheduler.h
    std::optional<std::string> record_key;
    // Metrics: the bounded type label, when it entered its queue, and
    // whether it is queued again after a lost stream (not a new attempt).
    int type_index = 0;
    absl::Time queued_at;
    bool redelivery = false;
    // Lost streams it was in flight on (core/engine/redelivery.h).
    int strikes = 0;
  };
  struct PendingDeadLetter {
    QueuedEvent queued;
    DeadLetter letter;
  };
  struct InFlight {
    QueuedEvent queued;
    int64_t stream_id = 0;
    absl::Time deadline;
    absl::Time dispatched_at;
  };
  struct PartitionEntry {
    PartitionState state;
    uint64_t epoch = 0;
    std::optional<int64_t> last_committed;
    // Offsets held by a `block` failure, with the event (for a later skip).
    std::map<int64_t, QueuedEvent> blocked;
    // This partition's share of buffered_events_.
    int64_t buffered = 0;
    // Offsets begun and not yet committable, with when they were consumed,
    // in offset order (pruned as the commit position advances): the front
    // is the commit blocker.
    std::deque<std::pair<int64_t, absl::Time>> begun;
    std::optional<int64_t> start_offset;
    // Operator pause: queued events set aside (in queue order) until resumed.
    bool paused = false;
    std::deque<QueuedEvent> parked;
  };
  struct StreamEntry {
    WorkerStream* stream = nullptr;
    int processor = 0;
    bool ready = false;
    int64_t credit = 0;  // granted minus sent
    int64_t in_flight = 0;
    std::string worker_name;
    // A protocol error asked for its reset: nothing more is sent to it and
    // what it sends is ignored until it is closed.
    bool resetting = false;
    // Quarantine (core/engine/redelivery.h): the delivery id of the quarantined
    // event it holds (nothing else is sent to it meanwhile), and whether it
    // is being drained to take one.
    uint64_t quarantined_id = 0;
    bool reserved = false;
    // Why it is being reset (for the redelivery-limit error).
    std::string reset_reason;
  };

  // One queued message for a stream (events, or a cancel when `cancel`).
  struct Outgoing {
    int64_t stream_id = 0;
    WorkerStream* stream = nullptr;
    bool cancel = false;
    EventsWire events;
    std::vector<uint64_t> ids;
  };
  // Locks mu_; on destruction sends what the outbox holds (see Threading).
  class SendingLock;
  friend class SendingLock;
  // Sends the outbox with mu_ held on entry; returns with mu_ released.
  void FlushOutboxAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);

  void SubmitLocked(v1::Event event, int64_t bytes, std::optional<std::string> record_key,
                    absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int ProcessorFor(const std::string& type) const;
  Ordering OrderingFor(const std::string& topic) const;
  // Into its lane (or unordered queue); set aside instead when its partition
  // is paused, unless `even_if_paused` (a retry of a dispatched event).
  void EnqueueLocked(QueuedEvent queued, bool front, bool even_if_paused = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkLaneReadyLocked(int lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event reached a terminal result: finish its offset, free its budget.
  void FinishLocked(const QueuedEvent& queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A terminal failure: applies the policy (dead letter, skip or block). The
  // lane must already be released (except for block, which keeps it).
  void FailLocked(QueuedEvent queued, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the event to `topic`; it is finished once Kafka acknowledges. The
  // caller has released its lane.
  void DeadLetterLocked(QueuedEvent queued, const std::string& topic, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteDeadLetterLocked(uint64_t token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops all work of these partitions (revoke, reset); returns how many
  // events were dropped.
  int64_t DropWorkLocked(const std::set<TopicPartition>& partitions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDeadLetterWritten(uint64_t token, absl::Status status);
  // RETRY (or a retried timeout): backoff at the head of its lane, or a
  // terminal failure once attempts are used up.
  void RetryOrFailLocked(QueuedEvent queued, uint32_t retry_after_ms, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration BackoffLocked(const ProcessorConfig& processor, int attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker broke the protocol: its in-flight events go back (redelivery)
  // and the stream is reset.
  void ProtocolErrorLocked(int64_t stream_id, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the stream's in-flight events back for redelivery, charging them
  // (core/engine/redelivery.h); those past the limit take the failure policy with
  // an error naming `why`, the stream's loss.
  void RequeueStreamEventsLocked(int64_t stream_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLaneLocked(const QueuedEvent& queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stamps a delivery id and deadline on the event and moves it to the
  // in-flight table on the stream (credit, counts); returns the event, to be
  // appended to an Events message before the next delivery starts.
  const v1::Event& StartDeliveryLocked(QueuedEvent queued, int64_t stream_id,
                                       StreamEntry& stream, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Quarantined events (core/engine/redelivery.h): each goes, alone, to a stream of
  // `processor` with nothing in flight; when there is none, one stream is
  // reserved (gets nothing new) until it drains.
  void DispatchQuarantinedLocked(int processor, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HoldsQuarantinedLocked(const StreamEntry& stream) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes and returns the quarantined events that `match`.
  std::vector<QueuedEvent> TakeQuarantinedLocked(
      const std::function<bool(const QueuedEvent&)>& match) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that `offset` of `entry` was consumed at `now`.
  static void NoteBegunLocked(PartitionEntry& entry, int64_t offset, absl::Time now);
  void CountProtocolErrorLocked(int processor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddCreditLocked(StreamEntry& entry, uint32_t credit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Config config_;
  const Clock* const clock_;
  DeadLetterWriter* const dead_letters_;
  EngineStats* const stats_;
  std::map<std::string, int> processor_by_type_;
  int default_processor_ = -1;
  std::map<std::string, Ordering> ordering_by_topic_;
  const SchedulingPlan plan_;
  // Queues of (processor, flow) in ready_lanes_ and unordered_.
  size_t QueueIndex(int processor, int flow) const {
    return static_cast<size_t>(processor) * static_cast<size_t>(plan_.flow_count()) +
           static_cast<size_t>(flow);
  }

  mutable absl::Mutex mu_;
  std::map<TopicPartition, PartitionEntry> partitions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_delivery_id_ ABSL_GUARDED_BY(mu_) = 1;
  Lanes<QueuedEvent> lanes_ ABSL_GUARDED_BY(mu_);
  // Lanes whose head may be dispatched, per (processor, flow) (QueueIndex),
  // in the order they became ready (round-robin across lanes). A flow's
  // lanes are flow * lane_count ... + lane_count - 1.
  std::vector<std::deque<int>> ready_lanes_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> lane_marked_ready_ ABSL_GUARDED_BY(mu_);
  // UNORDERED topics bypass lanes: one FIFO per (processor, flow).
  std::vector<std::deque<QueuedEvent>> unordered_ ABSL_GUARDED_BY(mu_);
  // Which flow a processor's next credit goes to.
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  // Events waiting for record timestamp + delay.
  DelayStage<QueuedEvent> delayed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StreamEntry> streams_ ABSL_GUARDED_BY(mu_);
  int64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Round-robin position per processor over its streams.
  std::vector<int64_t> last_stream_used_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_events_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  EngineCounters counters_ ABSL_GUARDED_BY(mu_);
  bool dispatching_stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Operator pauses: the requested set and how many assigned partitions are
  // paused (0 keeps the enqueue path free of lookups).
  std::set<TopicPartition> paused_set_ ABSL_GUARDED_BY(mu_);
  int paused_partitions_ ABSL_GUARDED_BY(mu_) = 0;
  // Failures can come once per record: at most 20 lines per 10 s.
  LogRateLimiter failure_log_limiter_ ABSL_GUARDED_BY(mu_){20, absl::Seconds(10)};
  // A hostile worker can break the protocol on every reconnect.
  LogRateLimiter protocol_log_limiter_ ABSL_GUARDED_BY(mu_){20, absl::Seconds(10)};
  // Per processor: events lost with their streams too often to share one,
  // waiting for a stream of their own (their lanes stay busy meanwhile).
  std::vector<std::deque<QueuedEvent>> quarantine_ ABSL_GUARDED_BY(mu_);
  // Retries waiting out their backoff (their lanes stay busy meanwhile).
  std::multimap<absl::Time, QueuedEvent> retries_ ABSL_GUARDED_BY(mu_);
  // Dead letters being written, by token; and failed writes waiting to retry.
  std::map<uint64_t, PendingDeadLetter> dead_letters_pending_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, uint64_t> dead_letter_retries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_dead_letter_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<uint64_t> blocked_generation_{0};
  absl::BitGen random_ ABSL_GUARDED_BY(mu_);
  // Messages for streams, sent after mu_ is released (FlushOutboxAndUnlock).
  std::vector<Outgoing> outbox_ ABSL_GUARDED_BY(mu_);
  // Reused by DispatchLocked (per-call scratch).
  std::vector<int64_t> candidates_ ABSL_GUARDED_BY(mu_);
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

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_ENGINE_H_
