#include "core/kafka/command_applier.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"
#include "core/kafka/consumer_stats.h"
#include "core/kafka/partition_text.h"

namespace ferry {
namespace {

using v1::internal::CommandResult;

constexpr int kSeekTimeoutMs = 10000;

CommandResult ResultFor(const std::string& command_id, const TopicPartition& partition) {
  CommandResult result;
  result.set_command_id(command_id);
  result.set_topic(partition.topic);
  result.set_partition(partition.partition);
  return result;
}

// Commits `offset` as the group's position of `partition` (synchronously).
absl::Status CommitOffset(RdKafka::KafkaConsumer& consumer, const TopicPartition& partition,
                          int64_t offset) {
  std::unique_ptr<RdKafka::TopicPartition> target(
      RdKafka::TopicPartition::create(partition.topic, partition.partition, offset));
  std::vector<RdKafka::TopicPartition*> list{target.get()};
  return KafkaErrorToStatus(consumer.commitSync(list), "commit");
}

// RateLimitConfig has no ==.
bool SameLimits(const std::map<std::string, RateLimitConfig>& a,
                const std::map<std::string, RateLimitConfig>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.events_per_second == y.second.events_per_second &&
           x.second.burst == y.second.burst;
  });
}

}  // namespace

CommandApplier::CommandApplier(Engine* engine, ConsumerStats* stats)
    : engine_(engine), stats_(stats) {}

std::set<TopicPartition> CommandApplier::OperatorPaused(
    const std::vector<TopicPartition>& assignment) {
  if (control_ == nullptr) return {};
  const std::set<TopicPartition> paused = control_->Paused(assignment);
  if (paused != operator_paused_) {
    std::vector<TopicPartition> newly;
    for (const TopicPartition& tp : paused) {
      if (operator_paused_.count(tp) == 0) newly.push_back(tp);
    }
    if (!newly.empty()) LogInfo("consumer", "paused by operator: ", DescribePartitions(newly));
    operator_paused_ = paused;
    engine_->SetPaused(operator_paused_);
  }
  return operator_paused_;
}

void CommandApplier::Forget(const std::vector<TopicPartition>& revoked) {
  for (const TopicPartition& tp : revoked) operator_paused_.erase(tp);
}

void CommandApplier::Apply(RdKafka::KafkaConsumer& consumer,
                           const std::vector<TopicPartition>& assignment) {
  if (control_ == nullptr) return;
  ApplyRateLimits();
  if (assignment.empty()) return;
  AcknowledgePauses(assignment);
  ApplyResets(consumer, assignment);
  ApplySkips(assignment);
}

void CommandApplier::ApplyRateLimits() {
  std::map<std::string, RateLimitConfig> limits = control_->RateLimits();
  if (SameLimits(limits, rate_limits_)) return;
  std::vector<std::string> text;
  for (const auto& [processor, limit] : limits) {
    text.push_back(limit.limited() ? absl::StrCat(processor, " ", limit.events_per_second, "/s")
                                   : absl::StrCat(processor, " unlimited"));
  }
  LogInfo("consumer", "operators' rate limits: ",
          text.empty() ? std::string("none (configured limits)") : absl::StrJoin(text, ", "));
  rate_limits_ = std::move(limits);
  engine_->SetRateLimits(rate_limits_);
}

void CommandApplier::AcknowledgePauses(const std::vector<TopicPartition>& assignment) {
  // The caller put the pauses and resumes read so far in force.
  std::vector<CommandResult> acks;
  for (const ControlLog::PendingAck& pending : control_->PendingPauseAcks(assignment)) {
    CommandResult ack = ResultFor(pending.command_id, pending.partition);
    ack.set_ok(true);
    acks.push_back(std::move(ack));
  }
  if (absl::Status acked = control_->ReportResults(std::move(acks)); !acked.ok()) {
    LogWarn("consumer", "could not acknowledge a pause/resume: ", acked.ToString());
  }
}

void CommandApplier::ApplyResets(RdKafka::KafkaConsumer& consumer,
                                 const std::vector<TopicPartition>& assignment) {
  for (const ControlLog::PendingReset& reset : control_->PendingResets(assignment)) {
    // Drop the partition's work (new epoch: late results are stale), move
    // the fetch position, then commit it so the group agrees even if this
    // replica dies before committing anything else.
    engine_->ResetPartition(reset.partition);
    std::unique_ptr<RdKafka::TopicPartition> target(RdKafka::TopicPartition::create(
        reset.partition.topic, reset.partition.partition, reset.offset));
    absl::Status status = KafkaErrorToStatus(consumer.seek(*target, kSeekTimeoutMs), "seek");
    if (status.ok()) status = CommitOffset(consumer, reset.partition, reset.offset);
    ReportReset(reset, status);
  }
}

void CommandApplier::ApplySkips(const std::vector<TopicPartition>& assignment) {
  for (const ControlLog::PendingSkip& skip : control_->PendingSkips(assignment)) {
    CommandResult result = ResultFor(skip.command_id, skip.partition);
    absl::StatusOr<std::string> outcome = engine_->SkipOffset(skip.partition, skip.offset);
    result.set_ok(outcome.ok());
    if (outcome.ok()) {
      result.set_outcome(*outcome);
    } else {
      result.set_error(std::string(outcome.status().message()));
    }
    absl::Status reported = control_->ReportResult(std::move(result));
    if (!reported.ok()) {
      LogWarn("consumer", "could not record the skip result: ", reported.ToString());
    }
  }
}

std::vector<ControlLog::PendingReset> CommandApplier::SetStartOffsets(
    std::vector<RdKafka::TopicPartition*>& partitions, absl::Duration catch_up_timeout) {
  if (control_ == nullptr) return {};
  // Read every operator command issued so far before fetching: a partition
  // paused or reset elsewhere must not run on from its old state here.
  absl::Status caught_up = control_->CatchUp(catch_up_timeout);
  if (!caught_up.ok()) {
    LogWarn("consumer", "control topic not read to its end (", caught_up.ToString(),
            "); commands issued meanwhile apply when they are read");
  }
  std::vector<TopicPartition> assigned;
  for (const RdKafka::TopicPartition* p : partitions) assigned.push_back({p->topic(), p->partition()});
  std::vector<ControlLog::PendingReset> resets = control_->PendingResets(assigned);
  for (const ControlLog::PendingReset& reset : resets) {
    for (RdKafka::TopicPartition* partition : partitions) {
      if (partition->topic() == reset.partition.topic &&
          partition->partition() == reset.partition.partition) {
        partition->set_offset(reset.offset);
      }
    }
  }
  return resets;
}

void CommandApplier::CommitStartResets(RdKafka::KafkaConsumer& consumer,
                                       const std::vector<ControlLog::PendingReset>& resets) {
  if (control_ == nullptr) return;
  for (const ControlLog::PendingReset& reset : resets) {
    ReportReset(reset, CommitOffset(consumer, reset.partition, reset.offset));
  }
}

void CommandApplier::ReportReset(const ControlLog::PendingReset& reset,
                                 const absl::Status& status) {
  if (stats_ != nullptr) stats_->Commit(status.ok());
  CommandResult result = ResultFor(reset.command_id, reset.partition);
  result.set_ok(status.ok());
  if (status.ok()) {
    LogInfo("consumer", "reset ", reset.partition.ToString(), " to offset ", reset.offset,
            " (command ", reset.command_id, ")");
  } else {
    result.set_error(std::string(status.message()));
    LogError("consumer", "reset ", reset.partition.ToString(), " to ", reset.offset,
             " failed: ", status.ToString());
  }
  absl::Status reported = control_->ReportResult(std::move(result));
  if (!reported.ok()) {
    LogWarn("consumer", "could not record the reset result: ", reported.ToString());
  }
}

}  // namespace ferry
