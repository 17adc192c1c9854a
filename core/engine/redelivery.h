// Redelivery: how many times an event may lose its worker stream before it
// takes the failure policy, and which events of a lost stream are charged.
//
// A stream that is lost (worker crash, network, a reset after a protocol
// error) hands its in-flight events back for redelivery, which is not an
// attempt. But a message that every worker rejects (its gRPC library or
// handler ends the stream) would be redelivered forever, and every partition
// with an event in flight beside it would stall too. A lost stream cannot say
// which of its events killed it, so the engine narrows it down:
//   * each event counts the lost streams it was in flight on ("strikes");
//   * an event with a strike is dispatched in an Events message of its own
//     (EventsWire::alone), never batched with other partitions' events;
//   * when a lost stream held events that already had a strike, only those
//     are charged: fresh events that merely shared the stream are
//     redelivered without a strike;
//   * from kQuarantineStrikes on, the event is quarantined: it goes only to
//     a stream with nothing else in flight, and that stream gets nothing else
//     until its result (one stream is drained for it when none is idle), so
//     a further loss is its own and never costs other events a strike;
//   * an event is redelivered at most kMaxRedeliveries times: the next loss
//     makes it a terminal failure (dead letter, skip or block, per its
//     processor's on_failure) whose error says so and names the last loss,
//     counted in ferry_redelivery_limit_total.
// The bound is fixed and generous: legitimate losses (a worker restarted or
// crashing while the event was in flight) rarely hit one event more than a
// couple of times, while a message that kills every stream reaches it within
// seconds (streams reconnect after 100 ms to 5 s). Quarantine starts only at
// the second strike, so one worker crash costs no throughput beyond the
// unbatched redelivery of its in-flight events.
//
// Threading: pure functions; the Engine calls them under its mutex.
#ifndef FERRY_CORE_ENGINE_REDELIVERY_H_
#define FERRY_CORE_ENGINE_REDELIVERY_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr int kMaxRedeliveries = 10;
// Strikes from which an event is quarantined.
inline constexpr int kQuarantineStrikes = 2;

// Whether an event with `strikes` is charged for the loss of a stream that
// held events with strikes (`stream_held_suspects`).
inline bool ChargedForLostStream(int strikes, bool stream_held_suspects) {
  return strikes > 0 || !stream_held_suspects;
}

// True once `strikes` exceeds the bound: the event takes the failure policy.
inline bool RedeliveriesExhausted(int strikes) { return strikes > kMaxRedeliveries; }

// The terminal error of an event whose streams kept being lost.
inline std::string RedeliveryLimitError(int strikes, absl::string_view last_loss) {
  return absl::StrCat("redelivery limit: the worker stream was lost ", strikes,
                      " times while this event was in flight (limit ", kMaxRedeliveries,
                      "); a worker may be rejecting it",
                      last_loss.empty() ? "" : absl::StrCat("; last: ", last_loss));
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_REDELIVERY_H_
