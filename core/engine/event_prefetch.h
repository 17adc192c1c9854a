// PrefetchEvents: asks the CPU for the cache lines of events that went cold
// (a KEY lane's run was consumed long before it is sent, and long before its
// results finish it), level by level: every event, then every event's string
// objects, then their bytes. Touching them one by one waits on each dependent
// miss in turn (event → string → bytes); this lets the misses overlap. Used
// by the dispatcher before it serializes a run and by Engine::OnResults
// before it applies a Results message (bench/RESULTS.md, issue 17). The
// one-event forms serve loops that ask a few events ahead, level by level
// (Engine::SubmitBatch, and the consumer for the spares it decodes into).
//
// Threading: pure; reads the events, which the caller must hold still.
#ifndef FERRY_CORE_ENGINE_EVENT_PREFETCH_H_
#define FERRY_CORE_ENGINE_EVENT_PREFETCH_H_

#include <cstddef>

#include "absl/types/span.h"
#include "core/common/prefetch.h"
#include "ferry/v1/processor.pb.h"

namespace ferry {

// One event's own lines (its string fields' pointers live there).
inline void PrefetchEvent(const v1::Event& event) {
  PrefetchLine(&event);
  PrefetchLine(reinterpret_cast<const char*>(&event) + kCacheLine);
}

// One event's string objects (short strings keep their bytes inside); the
// event's own lines must be in the cache already, or this waits for them.
inline void PrefetchEventStrings(const v1::Event& event) {
  PrefetchLine(&event.topic());
  PrefetchLine(&event.key());
  PrefetchLine(&event.type());
  PrefetchLine(&event.payload());
}

// One event's string bytes, up to `payload_bytes` of the payload; its string
// objects must be in the cache already.
inline void PrefetchEventBytes(const v1::Event& event, size_t payload_bytes) {
  PrefetchBytes(event.topic());
  PrefetchBytes(event.key());
  PrefetchBytes(event.type());
  PrefetchBytes(event.payload(), payload_bytes);
}

// `payload_bytes`: how much of each payload to ask for (the rest streams).
inline void PrefetchEvents(absl::Span<const v1::Event* const> events, size_t payload_bytes) {
  for (const v1::Event* event : events) PrefetchEvent(*event);
  for (const v1::Event* event : events) PrefetchEventStrings(*event);
  for (const v1::Event* event : events) PrefetchEventBytes(*event, payload_bytes);
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_EVENT_PREFETCH_H_
