// Rebalancer: the consumer's librdkafka rebalance callback. It follows the
// group's assignment: on assign, the engine gets new partition state, pending
// operator resets become start offsets, and the new partitions get the
// fetch state this process wants; on revoke, what is committable is
// committed (unless the assignment was lost: the new owner re-delivers) and
// the partitions' work is dropped. It owns the assignment.
//
// Both callbacks first let the consumer settle what belongs to the old
// assignment (Hooks::before_change: answers to commits in flight, the batch
// read so far), so nothing is committed or submitted across a rebalance.
//
// Threading: the callbacks run on the consumer's poll thread (librdkafka
// calls them from consume()); assignment() there too; AssignmentCopy() from
// any thread.
#ifndef FERRY_CORE_KAFKA_REBALANCE_H_
#define FERRY_CORE_KAFKA_REBALANCE_H_

#include <librdkafka/rdkafkacpp.h>

#include <functional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"

namespace ferry {

class CommandApplier;
class ConsumerStats;
class FlowControl;

class Rebalancer final : public RdKafka::RebalanceCb {
 public:
  struct Hooks {
    // Before the assignment changes; `lost`: the assignment was lost (the
    // coordinator is gone or fenced this member; commits in flight can only
    // fail, so do not wait for them).
    std::function<void(bool lost)> before_change;
    // After an assignment, with a control log: operator holds and commands.
    std::function<void()> refresh_commands;
  };
  // Every pointer must outlive the Rebalancer; `stats` may be null.
  Rebalancer(Engine* engine, ConsumerStats* stats, FlowControl* flow, CommandApplier* commands,
             absl::Duration catch_up_timeout, Hooks hooks);

  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode error,
                    std::vector<RdKafka::TopicPartition*>& partitions) override;

  const std::vector<TopicPartition>& assignment() const { return assignment_; }
  std::vector<TopicPartition> AssignmentCopy() const;

 private:
  void OnAssign(RdKafka::KafkaConsumer& consumer, std::vector<RdKafka::TopicPartition*>& partitions,
                bool incremental);
  void OnRevoke(RdKafka::KafkaConsumer& consumer,
                const std::vector<RdKafka::TopicPartition*>& partitions, bool incremental);
  static void Assign(RdKafka::KafkaConsumer& consumer,
                     std::vector<RdKafka::TopicPartition*>& partitions, bool incremental);
  static void Unassign(RdKafka::KafkaConsumer& consumer,
                       const std::vector<RdKafka::TopicPartition*>& partitions, bool incremental);
  void CommitRevoked(RdKafka::KafkaConsumer& consumer, const std::vector<CommitPosition>& positions);
  void PublishAssignment();

  Engine* const engine_;
  ConsumerStats* const stats_;
  FlowControl* const flow_;
  CommandApplier* const commands_;
  const absl::Duration catch_up_timeout_;
  const Hooks hooks_;
  std::vector<TopicPartition> assignment_;  // poll thread
  mutable absl::Mutex mu_;
  std::vector<TopicPartition> assignment_copy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_REBALANCE_H_
