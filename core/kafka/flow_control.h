// FlowControl: the consumer's fetch switch. It turns the engine's budgets
// (buffers over the high watermark → pause everything; under the low one →
// resume) and holds (partitions blocked by a failure or paused by an
// operator) into pause/resume calls, and remembers what it paused so that it
// never resumes a partition something else still holds.
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
  // one while paused (each takes the engine's lock).
  struct Budgets {
    std::function<bool()> over_high_watermark;
    std::function<bool()> under_low_watermark;
  };
  // `stats` may be null.
  FlowControl(Budgets budgets, ConsumerStats* stats);

  // Pauses every partition of `assignment` when the budgets are full or
  // fetching should stop (shutdown drains), resumes the unheld ones when
  // they have drained.
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
  // Everything is paused (budgets or stop).
  bool paused() const { return paused_; }

  struct Snapshot {
    bool paused = false;
    std::set<TopicPartition> held;
  };
  Snapshot snapshot() const;

 private:
  void PauseAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment);
  void ResumeAll(FetchSwitch& fetch, const std::vector<TopicPartition>& assignment);
  void Publish();

  const Budgets budgets_;
  ConsumerStats* const stats_;
  // Poll thread.
  bool paused_ = false;
  std::set<TopicPartition> held_;
  mutable absl::Mutex mu_;
  Snapshot published_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_FLOW_CONTROL_H_
