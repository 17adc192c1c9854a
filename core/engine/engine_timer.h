// EngineTimer: the clock that drives the engine's time-based work. Every
// tick (20ms by default) it calls Engine::OnTimer(), which expires per-event
// deadlines, releases retries whose backoff is over, releases delayed events
// whose time has come (topics[].delay) and retries dead letters. These need
// a finer clock than the commit interval, and nothing else calls OnTimer in
// the server, so without this thread nothing time-based would happen.
//
// The tick is injectable, so a test can run it at 1ms.
//
// Threading: Start/Stop from the owner thread; one internal thread
// (core/common/periodic_thread.h) calls OnTimer. Stop is idempotent, wakes
// the thread at once (it does not wait out a tick) and joins it; after Stop
// returns OnTimer is not called again. Destruction stops.
#ifndef FERRY_CORE_ENGINE_ENGINE_TIMER_H_
#define FERRY_CORE_ENGINE_ENGINE_TIMER_H_

#include "absl/time/time.h"
#include "core/common/periodic_thread.h"
#include "core/engine/downstream_guard.h"
#include "core/engine/engine.h"

namespace ferry {

class EngineTimer {
 public:
  static constexpr absl::Duration kDefaultTick = kEngineTimerTick;

  // Runs engine->OnTimer() every `tick`. `engine` must outlive the timer.
  explicit EngineTimer(Engine* engine, absl::Duration tick = kDefaultTick);

  void Start() { thread_.Start(); }
  void Stop() { thread_.Stop(); }

 private:
  PeriodicThread thread_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_ENGINE_TIMER_H_
