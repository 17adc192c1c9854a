#include "core/engine/engine_timer.h"

#include <utility>

namespace ferry {

EngineTimer::EngineTimer(Engine* engine, absl::Duration tick)
    : EngineTimer([engine] { engine->OnTimer(); }, tick) {}

EngineTimer::EngineTimer(std::function<void()> on_tick, absl::Duration tick)
    : on_tick_(std::move(on_tick)), tick_(tick) {}

EngineTimer::~EngineTimer() { Stop(); }

void EngineTimer::Start() {
  if (stopped_ || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void EngineTimer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EngineTimer::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // A timed wait on the stop condition: wakes at once on Stop().
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick_);
    if (stopping_) break;
    // The action runs without mu_, so Stop() never waits behind it for the
    // lock, only for the join.
    mu_.Unlock();
    on_tick_();
    mu_.Lock();
  }
}

}  // namespace ferry
