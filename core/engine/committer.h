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

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
  void Run();

  Engine* const engine_;
  OffsetCommitter* const kafka_;
  const absl::Duration commit_interval_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_COMMITTER_H_
