// PeriodicThread: one thread that runs an action every interval until it is
// stopped. The loop the engine timer, the committer and the progress
// reporter share: a timed wait on the stop flag (so Stop never waits out an
// interval), the action run without the lock, an idempotent Stop that joins.
//
// Threading: Start/Stop/destruction from the owner thread; the action runs
// on the internal thread only. After Stop returns the action never runs
// again; a stopped PeriodicThread does not start again.
#ifndef FERRY_CORE_COMMON_PERIODIC_THREAD_H_
#define FERRY_CORE_COMMON_PERIODIC_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

class PeriodicThread {
 public:
  // Runs `action` every `interval` (first after one interval).
  PeriodicThread(std::function<void()> action, absl::Duration interval);
  ~PeriodicThread();  // Stop()
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void Start();
  // Wakes the thread at once and joins it. Idempotent; returns whether the
  // thread had been running (false for a never-started or stopped one).
  bool Stop();

 private:
  void Run();

  const std::function<void()> action_;
  const absl::Duration interval_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ = false;  // owner thread only
};

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_PERIODIC_THREAD_H_
