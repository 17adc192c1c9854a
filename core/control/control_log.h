// ControlLog: the group-wide log of operator commands, kept in a Kafka topic.
//
// Pause, Resume, SetRateLimit, ResetOffsets and SkipOffset must reach
// whichever replica owns a partition (or, for a rate limit, every replica),
// now or after a rebalance, and a pause must outlive the replica that
// received it. Rather than a coordinator of our own, every
// replica appends commands to one single-partition topic (the control topic,
// `control.topic`) and reads it from the beginning:
//
//   * Pause/Resume records are state: every replica folds them, in log
//     order, into "is this partition paused", so a paused partition that
//     moves to another replica stays paused.
//   * RateLimit records are state too: the last one of a processor is in
//     force (a clear removes it), on every replica.
//   * A Reset record carries the target offset of each partition (resolved
//     by the replica that received the RPC, so every reader agrees). The
//     owner applies it and appends a Result record; a target with no result
//     is still pending and is applied by whoever owns the partition next. The
//     owner applies and writes the result on its poll thread, before it can
//     give the partition up, and a replica reads the log to its end before
//     fetching newly assigned partitions (CatchUp), so a reset is applied once
//     per partition in the normal course (a crash between applying and
//     writing the result can apply it twice: a replay, never a loss).
//   * A Skip record names one stuck event; only the replica owning the
//     partition when it reads the record acts on it, before the record
//     expires (a skip means "the event stuck now").
//
// Threading: Start/Stop from the owner; every other method from any thread.
// The reader runs on its own thread.
#ifndef FERRY_CORE_CONTROL_CONTROL_LOG_H_
#define FERRY_CORE_CONTROL_CONTROL_LOG_H_

#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/control/control_state.h"
#include "core/engine/types.h"
#include "core/kafka/admin.h"
#include "ferry/v1/control_log.pb.h"

namespace ferry {

class ControlLog {
 public:
  // The fold's answers (control_state.h), under their old names.
  using AppliedResult = ControlState::AppliedResult;
  using PendingReset = ControlState::PendingReset;
  using PendingAck = ControlState::PendingAck;
  using PendingSkip = ControlState::PendingSkip;

  // Builds the producer and reader from the `kafka:` map (no broker contact).
  // `replica` names this replica in the records it writes (its client.id).
  static absl::StatusOr<std::unique_ptr<ControlLog>> Create(const Config& config,
                                                            std::string replica);
  ~ControlLog();

  // Starts the reader thread, which creates the control topic when missing
  // (one partition, no retention limit: it holds the pause state) and reads
  // it from the beginning; while Kafka is unreachable it retries, so ferry
  // starts anyway (commands wait; CatchUp times out).
  absl::Status Start();
  void Stop();  // idempotent; joins the reader

  const std::string& topic() const { return topic_; }
  const std::string& replica() const { return replica_; }

  // Appends a record (command_id, issued_by and issued_at are filled in when
  // empty) and returns its offset once every in-sync replica has it.
  absl::StatusOr<int64_t> Append(v1::internal::ControlLogRecord record, absl::Duration timeout);
  // Appends several records; the offset of the last one.
  absl::StatusOr<int64_t> AppendAll(std::vector<v1::internal::ControlLogRecord> records,
                                    absl::Duration timeout);
  // Writes the result of applying `command_id` to one partition; the command
  // counts as applied here at once (before the record is read back).
  absl::Status ReportResult(v1::internal::CommandResult result);
  // Several results, written together (one wait for all acknowledgements).
  absl::Status ReportResults(std::vector<v1::internal::CommandResult> results);

  // Waits until the reader has read every record below `offset`.
  absl::Status WaitRead(int64_t offset, absl::Duration timeout);
  // Reads the log up to the end it has now (asked from the broker).
  absl::Status CatchUp(absl::Duration timeout);

  // Changes whenever a command is read or reported (cheap to poll).
  uint64_t Generation() const { return generation_.load(); }

  // The partitions of `among` that the pause state marks paused.
  std::set<TopicPartition> Paused(const std::vector<TopicPartition>& among) const;
  // The pause commands in force, in order ("pause all", "resume T/0,3").
  std::vector<std::string> PauseCommands() const;
  // Operators' rate limits by processor name (SetRateLimit), folded.
  std::map<std::string, RateLimitConfig> RateLimits() const;
  // Commands for partitions in `owned` that this replica should apply now.
  std::vector<PendingReset> PendingResets(const std::vector<TopicPartition>& owned) const;
  std::vector<PendingSkip> PendingSkips(const std::vector<TopicPartition>& owned) const;
  std::vector<PendingAck> PendingPauseAcks(const std::vector<TopicPartition>& owned) const;

  // Results read so far for `command_id`; waits up to `timeout` until there
  // are at least `expected` of them.
  std::vector<AppliedResult> WaitForResults(const std::string& command_id, size_t expected,
                                            absl::Duration timeout) const;

  // Broker queries for planning commands (any thread; each is a round trip).
  // NotFound when the topic does not exist.
  absl::StatusOr<int32_t> PartitionCount(const std::string& topic, absl::Duration timeout);
  // Earliest and end offset.
  absl::StatusOr<std::pair<int64_t, int64_t>> Watermarks(const TopicPartition& partition,
                                                         absl::Duration timeout);
  // The first offset whose timestamp is >= `timestamp_ms`; -1 when none is.
  absl::StatusOr<int64_t> OffsetForTimestamp(const TopicPartition& partition,
                                             int64_t timestamp_ms, absl::Duration timeout);

  // A unique command id (replica, time, counter).
  std::string NewCommandId();

 private:
  ControlLog(std::string topic, std::string replica);
  void ReadLoop();
  // Reader thread: folds one consumed record into state_.
  void Fold(RdKafka::Message& message);
  absl::Status EnsureTopic();
  absl::Status AutoCreateTopic(const std::string& why);
  // Reader thread: topic ensured and reading started (false: retry later).
  bool OpenForReading();

  const std::string topic_;
  const std::string replica_;
  std::unique_ptr<RdKafka::Producer> producer_;
  // Topic creation and the broker queries (its own handle).
  std::unique_ptr<KafkaAdmin> admin_;
  std::unique_ptr<RdKafka::Consumer> reader_;
  std::unique_ptr<RdKafka::Topic> reader_topic_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
  bool stopped_ = false;
  bool reading_ = false;  // reader thread only (read by Stop after the join)
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> next_command_{0};

  mutable absl::Mutex mu_;
  // The next offset to read (everything below it has been applied).
  int64_t read_position_ ABSL_GUARDED_BY(mu_) = 0;
  // Every record read so far, folded (plus results this replica reported).
  ControlState state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_CONTROL_CONTROL_LOG_H_
