// The engine's small value types: a partition's name, a commit position and
// the snapshots and counters Engine::Snapshot() returns. Components outside
// the engine (the Kafka consumer, the committer, the control log, metrics)
// include this header instead of the whole engine.
//
// Threading: plain values, no shared state.
#ifndef FERRY_CORE_ENGINE_TYPES_H_
#define FERRY_CORE_ENGINE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

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
  int64_t dead_lettered = 0;      // dead letters acknowledged by Kafka
  int64_t dead_letter_errors = 0; // dead-letter writes that failed (and were retried)
  int64_t skipped = 0;            // terminal failures skipped by policy
  int64_t blocked = 0;            // terminal failures holding their partition
  int64_t protocol_errors = 0;    // malformed worker traffic
  int64_t redelivery_limit = 0;   // events failed after too many lost streams (core/engine/redelivery.h)
  int64_t runs = 0;               // runs sent (core/engine/runs.h)
  int64_t run_events = 0;         // deliveries sent as members of a run
  int64_t not_attempted = 0;      // run members given back unhandled (NOT_ATTEMPTED or cancelled)
  int64_t breaker_spared = 0;     // failures given back unattempted: circuit breaker not closed
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

// A processor's circuit breaker (core/engine/circuit_breaker.h).
enum class BreakerState { kClosed = 0, kOpen = 1, kHalfOpen = 2 };
const char* BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

struct ProcessorSnapshot {
  int connected_streams = 0;  // streams that sent Ready
  int64_t credit = 0;         // credit granted by the workers and not yet used
  int64_t in_flight = 0;      // events at its workers
  // Protecting downstream (README "Protecting downstream"):
  // the rate limit in force (0: none) and whether an operator set it;
  double rate_limit_eps = 0;
  int64_t rate_limit_burst = 0;
  bool rate_limit_overridden = false;
  // the in-flight limit in force (adaptive, or streams x max_in_flight), and
  // whether it adapts;
  int64_t concurrency_limit = 0;
  bool concurrency_adaptive = false;
  // the circuit breaker's state (kClosed when it is off) and how often it
  // opened.
  bool breaker_enabled = false;
  BreakerState breaker_state = BreakerState::kClosed;
  int64_t breaker_opened = 0;
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

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_TYPES_H_
