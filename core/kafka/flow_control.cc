#include "core/kafka/flow_control.h"

#include <algorithm>
#include <utility>

#include "core/common/log.h"
#include "core/kafka/consumer_stats.h"
#include "core/kafka/partition_text.h"

namespace ferry {

FlowControl::FlowControl(Budgets budgets, ConsumerStats* stats, const Clock* clock,
                         absl::Duration hold_limit)
    : budgets_(std::move(budgets)), stats_(stats), clock_(clock), hold_limit_(hold_limit) {}

absl::Duration FlowControl::HoldLimit(absl::Duration max_poll_interval) {
  return std::min(kHoldBeforePause, max_poll_interval / 2);
}

void FlowControl::UpdateBudgets(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment,
                                bool stop_fetching) {
  if (stop_fetching) {
    if (state_ != State::kPaused) {
      LogInfo("consumer", "stopped fetching; draining in-flight events");
      PauseAll(fetch, assignment);
    }
    return;
  }
  switch (state_) {
    case State::kOpen:
      if (!budgets_.over_high_watermark()) return;
      LogDebug("consumer", "buffers full: holding records back");
      if (stats_ != nullptr) stats_->BackpressurePause();
      state_ = State::kHolding;
      holding_since_ = clock_->Now();
      Publish();
      return;
    case State::kHolding:
      if (budgets_.under_low_watermark()) {
        LogDebug("consumer", "buffers drained: taking records again");
        Open(fetch, assignment);
      } else if (clock_->Now() - holding_since_ >= hold_limit_) {
        LogDebug("consumer", "buffers still full: pausing fetch");
        PauseAll(fetch, assignment);
      }
      return;
    case State::kPaused:
      if (budgets_.under_low_watermark()) {
        LogDebug("consumer", "buffers drained: resuming fetch");
        Open(fetch, assignment);
      }
      return;
  }
}

void FlowControl::UpdateHeld(FetchSwitch& fetch, const std::vector<TopicPartition>& blocked,
                             const std::set<TopicPartition>& operator_paused) {
  std::set<TopicPartition> held(blocked.begin(), blocked.end());
  held.insert(operator_paused.begin(), operator_paused.end());
  std::vector<TopicPartition> newly_held;
  std::vector<TopicPartition> released;
  for (const TopicPartition& tp : held) {
    if (held_.count(tp) == 0) newly_held.push_back(tp);
  }
  for (const TopicPartition& tp : held_) {
    if (held.count(tp) == 0) released.push_back(tp);
  }
  held_.swap(held);
  Publish();
  if (!newly_held.empty()) {
    (void)fetch.Pause(newly_held);  // an unassigned partition is not fetched anyway
    std::vector<TopicPartition> newly_blocked;
    for (const TopicPartition& tp : newly_held) {
      if (std::find(blocked.begin(), blocked.end(), tp) != blocked.end()) {
        newly_blocked.push_back(tp);
      }
    }
    if (!newly_blocked.empty()) {
      LogWarn("consumer", "paused blocked partitions: ", DescribePartitions(newly_blocked));
    }
  }
  if (!released.empty() && state_ != State::kPaused) {
    (void)fetch.Resume(released);
    LogInfo("consumer", "resumed released partitions: ", DescribePartitions(released));
  }
}

void FlowControl::ApplyToAssigned(FetchSwitch& fetch, const std::vector<TopicPartition>& assigned) {
  if (assigned.empty()) return;
  if (state_ == State::kPaused) {
    (void)fetch.Pause(assigned);
  } else {
    (void)fetch.Resume(assigned);
  }
}

void FlowControl::Forget(const std::vector<TopicPartition>& partitions) {
  for (const TopicPartition& tp : partitions) held_.erase(tp);
  Publish();
}

FlowControl::Snapshot FlowControl::snapshot() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

void FlowControl::Publish() {
  absl::MutexLock lock(&mu_);
  published_.paused = state_ != State::kOpen;
  published_.held = held_;
}

void FlowControl::PauseAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment) {
  state_ = State::kPaused;
  Publish();
  if (assignment.empty()) return;
  if (absl::Status paused = fetch.Pause(assignment); !paused.ok()) {
    LogWarn("consumer", paused.message());
  }
}

void FlowControl::Open(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment) {
  const bool was_paused = state_ == State::kPaused;
  state_ = State::kOpen;
  Publish();
  if (was_paused) ResumeAll(fetch, assignment);
}

void FlowControl::ResumeAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment) {
  std::vector<TopicPartition> resumable;
  for (const TopicPartition& tp : assignment) {
    if (held_.count(tp) == 0) resumable.push_back(tp);
  }
  if (resumable.empty()) return;
  if (absl::Status resumed = fetch.Resume(resumable); !resumed.ok()) {
    LogWarn("consumer", resumed.message());
  }
}

}  // namespace ferry
