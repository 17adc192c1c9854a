#include "core/common/periodic_thread.h"

#include <utility>

namespace ferry {

PeriodicThread::PeriodicThread(std::function<void()> action, absl::Duration interval)
    : action_(std::move(action)), interval_(interval) {}

PeriodicThread::~PeriodicThread() { Stop(); }

void PeriodicThread::Start() {
  if (stopped_ || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

bool PeriodicThread::Stop() {
  if (stopped_) return false;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (!thread_.joinable()) return false;
  thread_.join();
  return true;
}

void PeriodicThread::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // A timed wait on the stop condition: wakes at once on Stop().
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_);
    if (stopping_) break;
    // The action runs without mu_: Stop() waits only for the join.
    mu_.Unlock();
    action_();
    mu_.Lock();
  }
}

}  // namespace ferry
