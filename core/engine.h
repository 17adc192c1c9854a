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
//     are dropped and counted.
//
// Threading: every public method is thread-safe (one internal mutex). Calls
// into WorkerStream happen with that mutex held; WorkerStream implementations
// must not block or call back.
#ifndef FERRY_CORE_ENGINE_H_
#define FERRY_CORE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/lanes.h"
#include "core/partition_state.h"
#include "core/worker_stream.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

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
};

struct PartitionSnapshot {
  TopicPartition partition;
  std::optional<int64_t> commit_offset;
  std::optional<int64_t> lowest_unfinished;
  size_t pending = 0;
};

struct EngineSnapshot {
  EngineCounters counters;
  int64_t buffered_events = 0;
  int64_t buffered_bytes = 0;
  int64_t in_flight = 0;
  int connected_streams = 0;
  std::vector<PartitionSnapshot> partitions;
};

class Engine {
 public:
  // Attempts before a RETRY-ing event becomes a terminal failure.
  static constexpr int kMaxAttempts = 5;

  Engine(const Config& config, const Clock* clock);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- Kafka side (the consumer's poll thread) ----
  void OnAssigned(const std::vector<TopicPartition>& partitions);
  // Drops queued and in-flight work of these partitions (late results become
  // stale) and returns their final committable positions, to commit now.
  std::vector<CommitPosition> OnRevoked(const std::vector<TopicPartition>& partitions);
  // Accepts a decoded event (id, attempt and deadline are set here).
  // `bytes` is its weight against the byte budget.
  void Submit(v1::Event event, int64_t bytes);
  // A record that could not be decoded: counted, logged and finished (it
  // never blocks its partition).
  void SubmitPoison(const TopicPartition& partition, int64_t offset,
                    const std::string& error);

  // Backpressure: true when buffered events or bytes reached their budget
  // (or a lane is full); the consumer pauses fetching.
  bool OverHighWatermark() const;
  // True when both budgets fell under resume_fraction; the consumer resumes.
  bool UnderLowWatermark() const;

  // ---- Worker side (gRPC reactor threads) ----
  // Registers a stream of processor `processor_index` (index into
  // Config::processors). No event is sent before OnReady.
  int64_t AddStream(int processor_index, WorkerStream* stream);
  void OnReady(int64_t stream_id, uint32_t max_in_flight);
  void OnCredit(int64_t stream_id, uint32_t credit);
  void OnResults(int64_t stream_id, const v1::Results& results);
  // The stream is gone: its in-flight events go back to the front of their
  // lanes (a redelivery, not a failed attempt). After this returns the engine
  // never touches `stream` again.
  void OnStreamClosed(int64_t stream_id);

  // ---- Timers (the committer thread) ----
  // Expires deliveries whose deadline passed: Cancel is sent, the event is a
  // terminal failure (timeouts are not retried).
  void ExpireDeadlines();

  // ---- Committer ----
  // Positions that advanced since they were last marked committed.
  std::vector<CommitPosition> PendingCommits() const;
  void MarkCommitted(const std::vector<CommitPosition>& positions);

  // ---- Status ----
  // Events consumed and not finished (queued, delayed or in flight).
  int64_t Buffered() const;
  EngineSnapshot Snapshot() const;

 private:
  struct QueuedEvent {
    v1::Event event;
    int64_t bytes = 0;
    uint64_t epoch = 0;
    int lane = 0;
    int processor = 0;
  };
  struct InFlight {
    QueuedEvent queued;
    int64_t stream_id = 0;
    absl::Time deadline;
  };
  struct PartitionEntry {
    PartitionState state;
    uint64_t epoch = 0;
    std::optional<int64_t> last_committed;
  };
  struct StreamEntry {
    WorkerStream* stream = nullptr;
    int processor = 0;
    bool ready = false;
    int64_t credit = 0;  // granted minus sent
    int64_t in_flight = 0;
  };

  int ProcessorFor(const std::string& type) const;
  Ordering OrderingFor(const std::string& topic) const;
  void EnqueueLocked(QueuedEvent queued, bool front) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkLaneReadyLocked(int lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event reached a terminal result: finish its offset, free its budget.
  void FinishLocked(const QueuedEvent& queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLaneLocked(const QueuedEvent& queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Config config_;
  const Clock* const clock_;
  std::map<std::string, int> processor_by_type_;
  int default_processor_ = -1;
  std::map<std::string, Ordering> ordering_by_topic_;

  mutable absl::Mutex mu_;
  std::map<TopicPartition, PartitionEntry> partitions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_delivery_id_ ABSL_GUARDED_BY(mu_) = 1;
  Lanes<QueuedEvent> lanes_ ABSL_GUARDED_BY(mu_);
  // Lanes whose head may be dispatched, per processor, in the order they
  // became ready (round-robin across lanes).
  std::vector<std::deque<int>> ready_lanes_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> lane_marked_ready_ ABSL_GUARDED_BY(mu_);
  // UNORDERED topics bypass lanes: one FIFO per processor.
  std::vector<std::deque<QueuedEvent>> unordered_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StreamEntry> streams_ ABSL_GUARDED_BY(mu_);
  int64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Round-robin position per processor over its streams.
  std::vector<int64_t> last_stream_used_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_events_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  EngineCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_H_
