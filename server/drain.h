// Drain: the first half of ferry's shutdown. From the moment it starts,
// nothing new is fetched and nothing new is dispatched — not a queued event,
// not a RETRY's next attempt, not a redelivery — and it waits, up to the
// grace period, only for what workers already have (and for dead letters
// being written). Everything else stays uncommitted and is delivered again
// by the partitions' next owner. The caller then commits and leaves the group.
//
// Threading: one call from the shutdown thread; `stop_waiting` is polled
// (a second signal).
#ifndef FERRY_SERVER_DRAIN_H_
#define FERRY_SERVER_DRAIN_H_

#include <functional>

#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "core/kafka/consumer.h"

namespace ferry {

// Stops fetching and dispatching, then waits until Engine::Drainable() is 0,
// `grace` has passed or `stop_waiting()` is true. Logs what it waits for and
// what is left for the next owner.
void Drain(Engine& engine, KafkaConsumer& consumer, absl::Duration grace,
           const std::function<bool()>& stop_waiting);

}  // namespace ferry

#endif  // FERRY_SERVER_DRAIN_H_
