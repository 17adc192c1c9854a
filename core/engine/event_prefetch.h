// PrefetchEvents: asks the CPU for the cache lines of events that went cold
// (a KEY lane's run was consumed long before it is sent, and long before its
// results finish it), level by level: every event, then every event's string
// objects, then their bytes. Touching them one by one waits on each dependent
// miss in turn (event → string → bytes); this lets the misses overlap. Used
// by the dispatcher before it serializes a run and by Engine::OnResults
// before it applies a Results message (bench/RESULTS.md, issue 17).
//
// Threading: pure; reads the events, which the caller must hold still.
#ifndef FERRY_CORE_ENGINE_EVENT_PREFETCH_H_
#define FERRY_CORE_ENGINE_EVENT_PREFETCH_H_

#include <cstddef>

#include "absl/types/span.h"
#include "core/common/prefetch.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

// `payload_bytes`: how much of each payload to ask for (the rest streams).
inline void PrefetchEvents(absl::Span<const v1::Event* const> events, size_t payload_bytes) {
  for (const v1::Event* event : events) {
    PrefetchLine(event);
    PrefetchLine(reinterpret_cast<const char*>(event) + kCacheLine);
  }
  for (const v1::Event* event : events) {
    PrefetchLine(&event->topic());
    PrefetchLine(&event->key());
    PrefetchLine(&event->type());
    PrefetchLine(&event->payload());
  }
  for (const v1::Event* event : events) {
    PrefetchBytes(event->topic());
    PrefetchBytes(event->key());
    PrefetchBytes(event->type());
    PrefetchBytes(event->payload(), payload_bytes);
  }
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENT_PREFETCH_H_
