// KafkaConsumer: ferry's member of the consumer group. It owns the librdkafka
// KafkaConsumer and its poll thread, and decodes records into the Engine. Its
// components run on that thread: Rebalancer (rebalance.h) follows the
// assignment (assign → new partition state; revoke → commit what is
// committable, drop the partitions' work), FlowControl (flow_control.h)
// pauses/resumes fetching when the Engine's budgets fill and drain, and
// CommandApplier (command_applier.h) applies operator commands from the
// control log. The poll loop never blocks on the engine, so the member is
// never kicked out of the group for being slow.
//
// Commits run on the poll thread only, like the rebalance callbacks, so a
// position computed before a revoke is never committed after it (it could
// move the new owner's committed offset backwards). Commit() from another
// thread hands its positions to the poll thread, which sends them without
// waiting for the answer (CommitQueue: a poll thread stuck on an unreachable
// coordinator could not hear that its assignment was lost), and waits for
// the answer itself, boundedly.
//
// Threading: Start/StopFetching/Stop from the owner thread; Commit,
// HighWatermarks and FetchStates from any thread; everything else runs on the
// poll thread.
#ifndef FERRY_CORE_KAFKA_CONSUMER_H_
#define FERRY_CORE_KAFKA_CONSUMER_H_

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/config/config.h"
#include "core/kafka/consumer_stats.h"
#include "core/control/control_log.h"
#include "core/kafka/decoder.h"
#include "core/kafka/record.h"
#include "core/engine/engine.h"
#include "core/engine/offset_committer.h"

namespace ferry {

// What the consumer knows of one assigned partition (no broker round trip).
struct PartitionFetchState {
  int64_t high_watermark = -1;  // end offset; -1 until known
  int64_t position = -1;        // next offset to fetch; -1 until known
  bool paused = false;          // fetching paused (backpressure, block, shutdown)
};

class CommandApplier;
class CommitQueue;
class FetchSwitch;
class FlowControl;
class Rebalancer;

class KafkaConsumer final : public OffsetCommitter {
 public:
  // Validates the `kafka:` map with librdkafka itself (an unknown property is
  // an InvalidArgument naming it). Touches no broker. `stats` may be null;
  // it must outlive the consumer.
  static absl::StatusOr<std::unique_ptr<KafkaConsumer>> Create(const Config& config,
                                                               Engine* engine,
                                                               const Decoder* decoder,
                                                               ConsumerStats* stats = nullptr);
  ~KafkaConsumer() override;

  // The librdkafka properties Create sets: ferry's defaults, overridden by
  // the `kafka:` map, then the commit settings ferry owns.
  static std::map<std::string, std::string> Properties(const Config& config);

  // Operator commands (pause, resume, reset, skip) from the control topic;
  // set before Start. Without it the consumer only follows its engine.
  void SetControlLog(ControlLog* control);

  // Subscribes to the configured topics and starts the poll thread.
  absl::Status Start();
  // Pauses every assigned partition (and any assigned later) but keeps
  // polling, so the member stays in the group while in-flight work drains.
  void StopFetching();
  // Joins the poll thread, which commits what is committable and leaves the
  // group (close). Idempotent.
  void Stop();

  // Commits on the poll thread (see above); positions whose assignment
  // changed meanwhile are dropped. FailedPrecondition when not polling.
  absl::Status Commit(const std::vector<CommitPosition>& positions) override;

  // High watermark per assigned partition, from librdkafka's cache (no broker
  // round trip); -1 when not known yet.
  std::map<TopicPartition, int64_t> HighWatermarks() const;
  // The group's committed offsets (-1: none) of any partitions, asked from
  // the group coordinator.
  absl::StatusOr<std::map<TopicPartition, int64_t>> Committed(
      const std::vector<TopicPartition>& partitions, absl::Duration timeout) const;
  // End offset, fetch position and pause state per assigned partition.
  std::map<TopicPartition, PartitionFetchState> FetchStates() const;

 private:
  class EventHandler;

  KafkaConsumer(const Config& config, Engine* engine, const Decoder* decoder,
                ConsumerStats* stats);
  void PollLoop();
  // Polls one round of records into batch_ (up to the engine's headroom).
  void TakeRecords();
  // After the loop: last commits, then close() (leaves the group).
  void LeaveGroup();
  // Adds a record to batch_ (a poison record flushes batch_ first and goes
  // to the engine at once, so records keep their order).
  void HandleMessage(const rd_kafka_message_t& message);
  // Asks the CPU for the spare Events the next few records decode into.
  void PrefetchSpares() const;
  // Hands batch_ to the engine (one lock, one dispatch).
  void FlushBatch();
  // Holds and commands when the engine's blocks or the control log changed,
  // then the budgets.
  void UpdateFlowControl();
  // Operator and failure holds in force, then the commands applied.
  void RefreshCommands();
  // Rebalance callbacks first settle the old assignment: the answers of
  // commits in flight (boundedly; not when the assignment was lost) and the
  // records read so far.
  void BeforeRebalance(bool assignment_lost);
  void AwaitCommitAnswers();
  // Poll thread: commits the still-current positions synchronously.
  absl::Status CommitOnPollThread(const std::vector<CommitPosition>& positions);
  // Poll thread: sends the commits other threads asked for.
  void ServeCommitRequests();

  const Config config_;
  Engine* const engine_;
  const Decoder* const decoder_;
  ConsumerStats* const stats_;
  const std::unique_ptr<FlowControl> flow_;
  const std::unique_ptr<CommandApplier> commands_;
  const std::unique_ptr<Rebalancer> rebalancer_;
  const std::unique_ptr<EventHandler> event_handler_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::unique_ptr<FetchSwitch> fetch_;  // on consumer_
  struct QueueReleaser {
    void operator()(rd_kafka_queue_t* queue) const { rd_kafka_queue_destroy(queue); }
  };
  // consumer_'s own queue (what rd_kafka_consumer_poll reads), read in
  // slices by the poll thread.
  std::unique_ptr<rd_kafka_queue_t, QueueReleaser> consumer_queue_;
  std::thread poll_thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_fetching_{false};
  bool started_ = false;
  bool stopped_ = false;
  // Poll-thread state.
  // Records consumed in this round, not yet handed to the engine (a round
  // takes what librdkafka has ready, bounded by the engine's headroom).
  std::vector<Engine::SubmitItem> batch_;
  // Finished Events handed back by the engine, decoded into before new ones
  // are made (at most one round's worth: Engine::SubmitBatch).
  std::vector<std::unique_ptr<v1::Event>> spare_events_;
  RawRecord record_;  // HandleMessage's scratch
  int64_t batch_bytes_ = 0;
  uint64_t blocked_generation_ = 0;
  uint64_t control_generation_ = 0;
  struct CommitRequest {
    std::vector<CommitPosition> positions;
    absl::Status status;
    absl::Notification done;
  };
  // Poll thread: commits sent for other threads, answers not yet served.
  std::unique_ptr<CommitQueue> commit_queue_;
  std::thread::id poll_thread_id_;
  absl::Mutex commit_mu_;
  bool polling_ ABSL_GUARDED_BY(commit_mu_) = false;
  std::vector<std::shared_ptr<CommitRequest>> commit_requests_ ABSL_GUARDED_BY(commit_mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_CONSUMER_H_
