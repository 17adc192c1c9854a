// FlowControl: the consumer's fetch switch. It turns the engine's budgets
// and holds (partitions blocked by a failure or paused by an operator) into
// what the poll loop does and into pause/resume calls, and remembers what it
// paused so that it never resumes a partition something else still holds.
//
// Budgets, in three states:
//  - open: the poll loop takes records.
//  - holding (buffers over the high watermark): the loop takes no records
//    but librdkafka is not paused, so what it fetched stays in its queue
//    (bounded by queued.max.messages.kbytes) and the loop takes it the moment
//    the buffers fall under the low watermark. A librdkafka pause would purge
//    that queue, and its resume restarts the fetcher only when the broker
//    thread next wakes (up to a second later, librdkafka 2.15): with fast
//    workers the buffers drained and the workers idled for ~0.45 s of every
//    pause cycle (bench/RESULTS.md, issue 17).
//  - paused: everything is paused through librdkafka. After HoldLimit
//    of holding (the loop must poll again, or rebalances wait: they arrive
//    in the same queue as records), and for good once fetching stops.
//
// It knows neither librdkafka nor the Engine: the fetcher is a FetchSwitch
// and the budgets are two predicates, so its decisions are unit-tested with
// fakes (flow_control_test.cc).
//
// Threading: every method but snapshot() on the consumer's poll thread;
// snapshot() from any thread.
#ifndef FERRY_CORE_KAFKA_FLOW_CONTROL_H_
#define FERRY_CORE_KAFKA_FLOW_CONTROL_H_

#include <functional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/engine/types.h"

namespace ferry {

class ConsumerStats;

// Pauses and resumes fetching of partitions (librdkafka in production).
class FetchSwitch {
 public:
  virtual ~FetchSwitch() = default;
  virtual absl::Status Pause(const std::vector<TopicPartition>& partitions) = 0;
  virtual absl::Status Resume(const std::vector<TopicPartition>& partitions) = 0;
};

class FlowControl {
 public:
  // Read only when they matter: the high watermark while fetching, the low
  // one while holding or paused (each takes the engine's lock).
  struct Budgets {
    std::function<bool()> over_high_watermark;
    std::function<bool()> under_low_watermark;
  };
  // How long the loop may hold records back before it pauses everything and
  // polls again: the longest a rebalance waits for a backpressured consumer.
  static constexpr absl::Duration kHoldBeforePause = absl::Seconds(1);
  // kHoldBeforePause, or half of max.poll.interval.ms if that is less (the
  // loop must poll within it, or librdkafka leaves the group).
  static absl::Duration HoldLimit(absl::Duration max_poll_interval);

  // `stats` may be null.
  FlowControl(Budgets budgets, ConsumerStats* stats, const Clock* clock = RealClock::Get(),
              absl::Duration hold_limit = kHoldBeforePause);

  // Holds records back when the budgets are full, pauses every partition of
  // `assignment` when holding lasted the hold limit or fetching should
  // stop (shutdown drains), and opens again (resuming the unheld
  // partitions if it paused) when the buffers have drained.
  void UpdateBudgets(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment,
                     bool stop_fetching);
  // Holds `blocked` ∪ `operator_paused`: pauses the newly held, resumes the
  // released (unless everything is paused).
  void UpdateHeld(FetchSwitch& fetch, const std::vector<TopicPartition>& blocked,
                  const std::set<TopicPartition>& operator_paused);
  // Newly assigned partitions get the state this process wants now
  // (librdkafka remembers a pause across unassign/assign).
  void ApplyToAssigned(FetchSwitch& fetch, const std::vector<TopicPartition>& assigned);
  // Drops the holds of `partitions` (revoked, or re-assigned and resumed).
  void Forget(const std::vector<TopicPartition>& partitions);
  // Budgets full: the loop must take no records (and wait for room).
  bool holding() const { return state_ == State::kHolding; }
  // Everything is paused through librdkafka (budgets or stop): the loop
  // polls, and nothing but events arrives.
  bool paused() const { return state_ == State::kPaused; }

  struct Snapshot {
    bool paused = false;  // holding or paused: no records taken
    std::set<TopicPartition> held;
  };
  Snapshot snapshot() const;

 private:
  void PauseAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment);
  void ResumeAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment);
  void Open(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment);
  void Publish();

  enum class State { kOpen, kHolding, kPaused };

  const Budgets budgets_;
  ConsumerStats* const stats_;
  const Clock* const clock_;
  const absl::Duration hold_limit_;
  // Poll thread.
  State state_ = State::kOpen;
  absl::Time holding_since_;
  std::set<TopicPartition> held_;
  mutable absl::Mutex mu_;
  Snapshot published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_FLOW_CONTROL_H_
