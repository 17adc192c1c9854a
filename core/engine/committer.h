// Committer: the thread that turns finished offsets into Kafka commits.
//
// Every commit interval it commits each partition's contiguous done prefix +
// 1, only for partitions whose position advanced since their last successful
// commit (a failed commit is retried on the next round). It does nothing
// else: the engine's timers (deadlines, retry backoffs, delays) run on
// EngineTimer (core/engine/engine_timer.h).
//
// Threading: Start/Stop from the owner; one internal thread. Stop is
// idempotent, joins, and makes one final commit.
#ifndef FERRY_CORE_ENGINE_COMMITTER_H_
#define FERRY_CORE_ENGINE_COMMITTER_H_

#include "absl/time/time.h"
#include "core/common/periodic_thread.h"
#include "core/engine/engine.h"
#include "core/engine/offset_committer.h"

namespace ferry {

class Committer {
 public:
  Committer(Engine* engine, OffsetCommitter* kafka, absl::Duration commit_interval);
  ~Committer();

  void Start();
  void Stop();

  // One commit round now; returns the first error (already logged).
  absl::Status CommitNow();

 private:
  Engine* const engine_;
  OffsetCommitter* const kafka_;
  bool stopped_ = false;  // owner thread only
  PeriodicThread thread_;  // last: stopped before the members above go
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_COMMITTER_H_
