// ProgressReporter: logs one line of progress every interval, so an operator
// (and the README's demo) sees ferry working without a metrics stack:
//   progress: rate=12345/s consumed=… acked=… failed=… in_flight=… lag=…
//             blocker=topic/3@1234 age=2.5s   (the oldest unfinished event)
//
// Threading: Start/Stop from the owner; one internal thread. Stop is
// idempotent and logs a final line.
#ifndef FERRY_SERVER_OBSERVABILITY_PROGRESS_REPORTER_H_
#define FERRY_SERVER_OBSERVABILITY_PROGRESS_REPORTER_H_

#include <functional>
#include <map>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/periodic_thread.h"
#include "core/engine/engine.h"

namespace ferry {

class ProgressReporter {
 public:
  using WatermarkSource = std::function<std::map<TopicPartition, int64_t>()>;

  ProgressReporter(const Engine* engine, WatermarkSource watermarks, absl::Duration interval);
  ~ProgressReporter();

  void Start();
  void Stop();

  // The line that would be logged now (also used by tests).
  std::string Line();

 private:
  const Engine* const engine_;
  const WatermarkSource watermarks_;
  const absl::Duration interval_;
  // Line() runs on the thread, then (after the join) on the owner's.
  int64_t last_acked_ = 0;
  absl::Time last_time_ = absl::Now();
  PeriodicThread thread_;  // last: stopped before the members above go
};

}  // namespace ferry

#endif  // FERRY_SERVER_OBSERVABILITY_PROGRESS_REPORTER_H_
