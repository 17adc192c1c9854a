#include "core/control/control_state.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry {
namespace {

using v1::internal::CommandResult;
using v1::internal::ControlLogRecord;
using v1::internal::PauseChange;

bool Matches(const PauseChange& change, const TopicPartition& tp) {
  if (change.all()) return true;
  if (change.topic() != tp.topic) return false;
  if (change.partitions().empty()) return true;
  return std::find(change.partitions().begin(), change.partitions().end(), tp.partition) !=
         change.partitions().end();
}

std::string Describe(const PauseChange& change) {
  std::string scope = change.all() ? "all" : change.topic();
  if (!change.all() && !change.partitions().empty()) {
    absl::StrAppend(&scope, "/", absl::StrJoin(change.partitions(), ","));
  }
  return absl::StrCat(change.paused() ? "pause " : "resume ", scope);
}

// The edge (SetRateLimit) refuses these; a record that carries one anyway
// (written by hand, or by a ferry with other rules) must not put a NaN or a
// negative rate into the engine.
bool Sane(const v1::internal::RateLimitChange& change) {
  return std::isfinite(change.events_per_second()) && change.events_per_second() >= 0 &&
         change.burst() >= 0 && !change.processor().empty();
}

}  // namespace

bool ControlState::Apply(const ControlLogRecord& record) {
  switch (record.body_case()) {
    case ControlLogRecord::kPause:
      // A change for every partition overrides all before it.
      if (record.pause().all()) pause_changes_.clear();
      pause_changes_.push_back(record.pause());
      if (record.pause().ack_until_ms() > 0) pause_acks_[record.command_id()] = record.pause();
      return true;
    case ControlLogRecord::kRateLimit: {
      const v1::internal::RateLimitChange& change = record.rate_limit();
      if (!Sane(change)) return true;  // read, and ignored
      if (change.clear()) {
        rate_limits_.erase(change.processor());
      } else {
        RateLimitConfig& limit = rate_limits_[change.processor()];
        limit.events_per_second = change.events_per_second();
        limit.burst = change.burst();
      }
      return true;
    }
    case ControlLogRecord::kReset:
      resets_[record.command_id()].assign(record.reset().targets().begin(),
                                          record.reset().targets().end());
      return true;
    case ControlLogRecord::kSkip:
      skips_[record.command_id()] = record.skip();
      return true;
    case ControlLogRecord::kResult: {
      const CommandResult& result = record.result();
      results_[result.command_id()].push_back({result, record.issued_by()});
      MarkAnswered(result.command_id(), TopicPartition{result.topic(), result.partition()});
      return true;
    }
    case ControlLogRecord::BODY_NOT_SET:
    default:
      return false;
  }
}

void ControlState::MarkAnswered(const std::string& command_id, const TopicPartition& partition) {
  answered_.insert({command_id, partition});
}

std::set<TopicPartition> ControlState::Paused(const std::vector<TopicPartition>& among) const {
  std::set<TopicPartition> paused;
  for (const TopicPartition& tp : among) {
    bool is_paused = false;
    for (const PauseChange& change : pause_changes_) {
      if (Matches(change, tp)) is_paused = change.paused();
    }
    if (is_paused) paused.insert(tp);
  }
  return paused;
}

std::vector<std::string> ControlState::PauseCommands() const {
  std::vector<std::string> commands;
  for (const PauseChange& change : pause_changes_) {
    if (change.all() && !change.paused()) continue;  // "resume all" leaves nothing
    commands.push_back(Describe(change));
  }
  return commands;
}

std::vector<ControlState::PendingReset> ControlState::PendingResets(
    const std::vector<TopicPartition>& owned) const {
  const std::set<TopicPartition> owned_set(owned.begin(), owned.end());
  std::vector<PendingReset> pending;
  for (const auto& [command_id, targets] : resets_) {
    for (const v1::internal::ResetTarget& target : targets) {
      TopicPartition tp{target.topic(), target.partition()};
      if (owned_set.count(tp) == 0 || answered_.count({command_id, tp}) > 0) continue;
      pending.push_back({command_id, std::move(tp), target.offset()});
    }
  }
  return pending;
}

std::vector<ControlState::PendingSkip> ControlState::PendingSkips(
    const std::vector<TopicPartition>& owned, int64_t now_ms) const {
  const std::set<TopicPartition> owned_set(owned.begin(), owned.end());
  std::vector<PendingSkip> pending;
  for (const auto& [command_id, skip] : skips_) {
    TopicPartition tp{skip.topic(), skip.partition()};
    if (owned_set.count(tp) == 0 || answered_.count({command_id, tp}) > 0) continue;
    if (skip.expires_at_ms() < now_ms) continue;
    pending.push_back({command_id, std::move(tp), skip.offset()});
  }
  return pending;
}

std::vector<ControlState::PendingAck> ControlState::PendingPauseAcks(
    const std::vector<TopicPartition>& owned, int64_t now_ms) const {
  std::vector<PendingAck> pending;
  for (const auto& [command_id, change] : pause_acks_) {
    if (change.ack_until_ms() < now_ms) continue;
    for (const TopicPartition& tp : owned) {
      if (Matches(change, tp) && answered_.count({command_id, tp}) == 0) {
        pending.push_back({command_id, tp});
      }
    }
  }
  return pending;
}

std::vector<ControlState::AppliedResult> ControlState::Results(
    const std::string& command_id) const {
  auto it = results_.find(command_id);
  return it == results_.end() ? std::vector<AppliedResult>{} : it->second;
}

size_t ControlState::ResultCount(const std::string& command_id) const {
  auto it = results_.find(command_id);
  return it == results_.end() ? 0 : it->second.size();
}

}  // namespace ferry
