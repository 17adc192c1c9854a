#include "server/drain.h"

#include "absl/time/clock.h"
#include "core/common/log.h"

namespace ferry {

void Drain(Engine& engine, KafkaConsumer& consumer, absl::Duration grace,
           const std::function<bool()>& stop_waiting) {
  consumer.StopFetching();
  // From now on a result only finishes its event: what has not reached a
  // worker could not finish within the drain for certain, and a dispatch
  // after the final commit would only be delivered twice.
  engine.StopDispatching();
  const absl::Time started = absl::Now();
  const absl::Time give_up = started + grace;
  LogInfo("ferry", "draining: waiting for ", engine.Drainable(), " events at workers; ",
          engine.Buffered() - engine.Drainable(),
          " more (queued, retrying, delayed) are not dispatched and stay for the next owner");
  // Events held by a `block` failure cannot finish without an operator, so
  // Drainable() does not count them.
  while (engine.Drainable() > 0 && absl::Now() < give_up && !stop_waiting()) {
    absl::SleepFor(absl::Milliseconds(20));  // polling a drain, not synchronising
  }
  const int64_t unfinished = engine.Drainable();
  if (unfinished > 0) {
    // Tests and operators look for "N events unfinished at shutdown".
    LogWarn("ferry", unfinished, " events unfinished at shutdown (still at workers after ",
            absl::FormatDuration(absl::Now() - started), "); they will be redelivered");
  } else {
    LogInfo("ferry", "drained in ", absl::FormatDuration(absl::Now() - started));
  }
}

}  // namespace ferry
