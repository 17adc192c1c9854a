#include "core/kafka/rebalance.h"

#include <set>
#include <utility>

#include "core/common/kafka_status.h"
#include "core/common/log.h"
#include "core/kafka/command_applier.h"
#include "core/kafka/consumer_stats.h"
#include "core/kafka/flow_control.h"
#include "core/kafka/partition_text.h"
#include "core/kafka/rd_partition_list.h"

namespace ferry {

Rebalancer::Rebalancer(Engine* engine, ConsumerStats* stats, FlowControl* flow,
                       CommandApplier* commands, absl::Duration catch_up_timeout, Hooks hooks)
    : engine_(engine),
      stats_(stats),
      flow_(flow),
      commands_(commands),
      catch_up_timeout_(catch_up_timeout),
      hooks_(std::move(hooks)) {}

void Rebalancer::rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode error,
                              std::vector<RdKafka::TopicPartition*>& partitions) {
  const bool incremental = consumer->rebalance_protocol() == "COOPERATIVE";
  if (error == RdKafka::ERR__ASSIGN_PARTITIONS) {
    OnAssign(*consumer, partitions, incremental);
  } else {
    OnRevoke(*consumer, partitions, incremental);
  }
}

std::vector<TopicPartition> Rebalancer::AssignmentCopy() const {
  absl::MutexLock lock(&mu_);
  return assignment_copy_;
}

void Rebalancer::PublishAssignment() {
  absl::MutexLock lock(&mu_);
  assignment_copy_ = assignment_;
}

void Rebalancer::OnAssign(RdKafka::KafkaConsumer& consumer,
                          std::vector<RdKafka::TopicPartition*>& partitions, bool incremental) {
  hooks_.before_change(/*lost=*/false);
  const std::vector<TopicPartition> assigned = ToTopicPartitions(partitions);
  if (stats_ != nullptr) stats_->Assigned();
  engine_->OnAssigned(assigned);
  // A pending reset becomes the partition's start offset.
  const std::vector<ControlLog::PendingReset> resets =
      commands_->SetStartOffsets(partitions, catch_up_timeout_);
  Assign(consumer, partitions, incremental);
  if (!incremental) assignment_.clear();
  assignment_.insert(assignment_.end(), assigned.begin(), assigned.end());
  RdFetchSwitch fetch(&consumer);
  flow_->ApplyToAssigned(fetch, assigned);
  PublishAssignment();
  LogInfo("consumer", "assigned: ", DescribePartitions(assigned));
  if (commands_->enabled()) {
    commands_->CommitStartResets(consumer, resets);
    // The new partitions were just resumed above; refreshing the holds
    // pauses the held ones among them again.
    flow_->Forget(assigned);
    hooks_.refresh_commands();
  }
}

void Rebalancer::Assign(RdKafka::KafkaConsumer& consumer,
                        std::vector<RdKafka::TopicPartition*>& partitions, bool incremental) {
  if (incremental) {
    if (RdKafka::Error* error = consumer.incremental_assign(partitions); error != nullptr) {
      LogError("consumer", "incremental assign failed: ", error->str());
      delete error;
    }
  } else if (const RdKafka::ErrorCode code = consumer.assign(partitions);
             code != RdKafka::ERR_NO_ERROR) {
    LogError("consumer", "assign failed: ", RdKafka::err2str(code));
  }
}

void Rebalancer::OnRevoke(RdKafka::KafkaConsumer& consumer,
                          const std::vector<RdKafka::TopicPartition*>& partitions,
                          bool incremental) {
  const bool lost = consumer.assignment_lost();
  hooks_.before_change(lost);
  const std::vector<TopicPartition> revoked = ToTopicPartitions(partitions);
  const std::vector<CommitPosition> positions = engine_->OnRevoked(revoked);
  if (stats_ != nullptr) stats_->Revoked(lost);
  if (lost) {
    LogWarn("consumer", "assignment lost (", DescribePartitions(revoked),
            "); not committing, the new owner re-delivers unfinished events");
  } else {
    CommitRevoked(consumer, positions);
  }
  Unassign(consumer, partitions, incremental);
  const std::set<TopicPartition> gone(revoked.begin(), revoked.end());
  std::vector<TopicPartition> kept;
  for (const TopicPartition& tp : assignment_) {
    if (gone.count(tp) == 0) kept.push_back(tp);
  }
  assignment_.swap(kept);
  flow_->Forget(revoked);
  commands_->Forget(revoked);
  PublishAssignment();
  LogInfo("consumer", "revoked: ", DescribePartitions(revoked));
}

void Rebalancer::CommitRevoked(RdKafka::KafkaConsumer& consumer,
                               const std::vector<CommitPosition>& positions) {
  if (positions.empty()) return;
  // These positions were computed just now, in this callback, for the
  // partitions being revoked (the engine has already forgotten them, so the
  // consumer's still-current check would drop them all).
  RdPartitionList list(positions);
  absl::Status status = KafkaErrorToStatus(consumer.commitSync(list.get()), "commit on revoke");
  if (stats_ != nullptr) stats_->Commit(status.ok());
  if (!status.ok()) {
    LogWarn("consumer", "commit on revoke failed: ", status.ToString());
  } else {
    LogInfo("consumer", "committed on revoke: ", DescribePositions(positions));
  }
}

void Rebalancer::Unassign(RdKafka::KafkaConsumer& consumer,
                          const std::vector<RdKafka::TopicPartition*>& partitions,
                          bool incremental) {
  if (!incremental) {
    consumer.unassign();
    return;
  }
  if (RdKafka::Error* error = consumer.incremental_unassign(partitions); error != nullptr) {
    LogError("consumer", "incremental unassign failed: ", error->str());
    delete error;
  }
}

}  // namespace ferry

