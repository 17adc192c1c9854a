// ControlState: the pure fold of the control log (control_log.h). Every
// replica reads the control topic from the beginning and folds each record,
// in log order, into this state: which partitions are paused, which
// processors an operator gave a rate limit, which resets
// and skips are still to be applied, which pause/resume commands still want
// an acknowledgement, and the results written so far.
//
// No Kafka here: records go in, answers come out, time is an argument. The
// fold is total: duplicates, records out of order, unknown kinds and results
// for commands never seen change nothing they should not (a result only
// marks its (command, partition) answered; a record of an unknown kind is
// ignored and Apply says so).
//
// Threading: not thread-safe; ControlLog serialises every call with its own
// mutex.
#ifndef FERRY_CORE_CONTROL_CONTROL_STATE_H_
#define FERRY_CORE_CONTROL_CONTROL_STATE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/engine/types.h"
#include "ferry/v1/control_log.pb.h"

namespace ferry {

class ControlState {
 public:
  // A command's result for one partition, with the replica that wrote it.
  struct AppliedResult {
    v1::internal::CommandResult result;
    std::string applied_by;
  };
  // A reset the owner of `partition` still has to apply.
  struct PendingReset {
    std::string command_id;
    TopicPartition partition;
    int64_t offset = 0;
  };
  // A pause or resume this replica should acknowledge for `partition`.
  struct PendingAck {
    std::string command_id;
    TopicPartition partition;
  };
  struct PendingSkip {
    std::string command_id;
    TopicPartition partition;
    int64_t offset = 0;
  };

  // Folds one record. False when the record has no kind this version knows
  // (nothing changed).
  bool Apply(const v1::internal::ControlLogRecord& record);
  // This replica answered `command_id` for `partition` (before its result
  // record is read back, so it is not applied twice meanwhile).
  void MarkAnswered(const std::string& command_id, const TopicPartition& partition);

  // The partitions of `among` that the pause state marks paused.
  std::set<TopicPartition> Paused(const std::vector<TopicPartition>& among) const;
  // The pause commands in force, in order ("pause all", "resume T/0,3").
  std::vector<std::string> PauseCommands() const;
  // Operators' rate limits by processor name (SetRateLimit; a clear removes
  // the processor): what Engine::SetRateLimits takes.
  const std::map<std::string, RateLimitConfig>& RateLimits() const { return rate_limits_; }
  // Commands for partitions in `owned` still to be applied; skips and
  // acknowledgements whose window ended before `now_ms` are left out.
  std::vector<PendingReset> PendingResets(const std::vector<TopicPartition>& owned) const;
  std::vector<PendingSkip> PendingSkips(const std::vector<TopicPartition>& owned,
                                        int64_t now_ms) const;
  std::vector<PendingAck> PendingPauseAcks(const std::vector<TopicPartition>& owned,
                                           int64_t now_ms) const;
  // Results read so far for `command_id`, in log order.
  std::vector<AppliedResult> Results(const std::string& command_id) const;
  size_t ResultCount(const std::string& command_id) const;

 private:
  std::vector<v1::internal::PauseChange> pause_changes_;
  std::map<std::string, RateLimitConfig> rate_limits_;
  std::map<std::string, std::vector<v1::internal::ResetTarget>> resets_;
  std::map<std::string, v1::internal::SkipCommand> skips_;
  // Pause/resume commands still within their acknowledgement window.
  std::map<std::string, v1::internal::PauseChange> pause_acks_;
  std::map<std::string, std::vector<AppliedResult>> results_;
  // (command, partition) answered: read back, or reported by this replica.
  std::set<std::pair<std::string, TopicPartition>> answered_;
};

}  // namespace ferry

#endif  // FERRY_CORE_CONTROL_CONTROL_STATE_H_
