// CommandApplier: applies the operator's commands from the control log
// (core/control) to the partitions this replica owns: which of them an
// operator paused (told to the engine, held by FlowControl), the operators'
// rate limits (told to the engine, for every processor), pause/resume
// acknowledgements, resets (drop the partition's work, seek, commit, report)
// and skips (one stuck event), and resets that become a newly assigned
// partition's start offset.
//
// Without a control log every method does nothing (the consumer then only
// follows its engine).
//
// Threading: SetControlLog before the consumer starts; everything else on
// the consumer's poll thread (inside rebalance callbacks too).
#ifndef FERRY_CORE_KAFKA_COMMAND_APPLIER_H_
#define FERRY_CORE_KAFKA_COMMAND_APPLIER_H_

#include <librdkafka/rdkafkacpp.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/control/control_log.h"
#include "core/engine/engine.h"

namespace ferry {

class ConsumerStats;

class CommandApplier {
 public:
  // `stats` may be null.
  CommandApplier(Engine* engine, ConsumerStats* stats);

  void SetControlLog(ControlLog* control) { control_ = control; }
  bool enabled() const { return control_ != nullptr; }
  // Changes whenever a command is read or reported; 0 without a control log.
  uint64_t Generation() const { return control_ != nullptr ? control_->Generation() : 0; }

  // The partitions of `assignment` an operator paused; the engine hears of
  // every change.
  std::set<TopicPartition> OperatorPaused(const std::vector<TopicPartition>& assignment);
  // Forgets operator pauses of revoked partitions.
  void Forget(const std::vector<TopicPartition>& revoked);
  // Puts the operators' rate limits in force (the engine hears of every
  // change, whatever the assignment), then acknowledges pauses/resumes and
  // applies resets and skips of `assignment`. Call after the operator
  // pauses are in force (OperatorPaused + hold).
  void Apply(RdKafka::KafkaConsumer& consumer, const std::vector<TopicPartition>& assignment);

  // The operators' rate limits the engine was last told (SetRateLimits).
  const std::map<std::string, RateLimitConfig>& rate_limits() const { return rate_limits_; }

  // Before assigning `partitions`: reads the control log to its end (bounded
  // by `catch_up_timeout`) and makes each pending reset the partition's
  // start offset. Returns those resets, for CommitStartResets.
  std::vector<ControlLog::PendingReset> SetStartOffsets(
      std::vector<RdKafka::TopicPartition*>& partitions, absl::Duration catch_up_timeout);
  // After the assignment: commits the start offsets so the group agrees,
  // and reports each reset.
  void CommitStartResets(RdKafka::KafkaConsumer& consumer,
                         const std::vector<ControlLog::PendingReset>& resets);

 private:
  void ApplyRateLimits();
  void AcknowledgePauses(const std::vector<TopicPartition>& assignment);
  void ApplyResets(RdKafka::KafkaConsumer& consumer, const std::vector<TopicPartition>& assignment);
  void ApplySkips(const std::vector<TopicPartition>& assignment);
  void ReportReset(const ControlLog::PendingReset& reset, const absl::Status& status);

  Engine* const engine_;
  ConsumerStats* const stats_;
  ControlLog* control_ = nullptr;
  std::set<TopicPartition> operator_paused_;
  // What the engine was last told (SetRateLimits): the engine starts with
  // none, so an empty log tells it nothing.
  std::map<std::string, RateLimitConfig> rate_limits_;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_COMMAND_APPLIER_H_
