#include "core/engine/engine_timer.h"

namespace ferry {

EngineTimer::EngineTimer(Engine* engine, absl::Duration tick)
    : thread_([engine] { engine->OnTimer(); }, tick) {}

}  // namespace ferry
