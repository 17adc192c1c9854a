// EngineTimer: the clock that drives the engine's time-based work. Every
// tick (20ms by default) it calls Engine::OnTimer(), which expires per-event
// deadlines, releases retries whose backoff is over, releases delayed events
// whose time has come (topics[].delay) and retries dead letters. These need
// a finer clock than the commit interval, and nothing else calls OnTimer in
// the server, so without this thread nothing time-based would happen.
//
// The tick action is injectable (the second constructor), so a test can
// count ticks without an engine.
//
// Threading: Start/Stop from the owner thread; one internal thread runs the
// tick action. Stop is idempotent, wakes the thread at once (it does not
// wait out a tick) and joins it; after Stop returns the action never runs
// again. Destruction stops.
#ifndef FERRY_CORE_ENGINE_ENGINE_TIMER_H_
#define FERRY_CORE_ENGINE_ENGINE_TIMER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"

namespace ferry {

class EngineTimer {
 public:
  static constexpr absl::Duration kDefaultTick = absl::Milliseconds(20);

  // Runs engine->OnTimer() every `tick`. `engine` must outlive the timer.
  explicit EngineTimer(Engine* engine, absl::Duration tick = kDefaultTick);
  // Runs `on_tick` every `tick`.
  EngineTimer(std::function<void()> on_tick, absl::Duration tick);
  ~EngineTimer();
  EngineTimer(const EngineTimer&) = delete;
  EngineTimer& operator=(const EngineTimer&) = delete;

  void Start();
  void Stop();

 private:
  void Run();

  const std::function<void()> on_tick_;
  const absl::Duration tick_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ = false;  // owner thread only
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_ENGINE_TIMER_H_
