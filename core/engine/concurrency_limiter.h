// ConcurrencyLimiter: a processor's in-flight limit under
// `processors[].concurrency: adaptive`, after the Vegas limit of Netflix's
// concurrency-limits library (com.netflix.concurrency.limits.limit.VegasLimit,
// itself after TCP Vegas): each sample's latency is compared with the lowest
// latency seen recently (the no-load latency); the events queued downstream
// are estimated as
//     queue = limit x (1 - no_load_latency / latency)
// and the limit grows while that queue is short (alpha), shrinks when it is
// long (beta), and is cut multiplicatively on a drop (RETRY or a timeout).
// A downstream whose latency grows with concurrency (a database with a fixed
// pool) so settles a few events above its pool size, where latency stays
// near the unloaded one.
//
// The limit grows only while the limit is in use (in flight at least half
// of it), so an idle processor does not inflate it. The no-load latency is
// forgotten every `probe` samples (and re-learnt from the next sample), so a
// downstream that got slower for good does not hold the limit down forever.
//
// `fixed` mode: limit() is the upper bound, and OnSample changes nothing.
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_CONCURRENCY_LIMITER_H_
#define FERRY_CORE_ENGINE_CONCURRENCY_LIMITER_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/config/config.h"

namespace ferry {

class ConcurrencyLimiter {
 public:
  // `max_limit`: the fixed bound, streams x max_in_flight (at least 1).
  // initial_limit and min_limit are clamped into [1, max_limit].
  ConcurrencyLimiter(const ConcurrencyConfig& config, int64_t max_limit);

  bool adaptive() const { return adaptive_; }
  // Events the processor's workers may hold together.
  int64_t limit() const;

  // One event's outcome: `latency` from dispatch to its result, `in_flight`
  // the processor's events in flight when the result came (before it left),
  // `dropped` true for RETRY and timeouts (not for FAIL, which is the
  // event's own fault, nor NOT_ATTEMPTED, which is not a sample at all).
  void OnSample(absl::Duration latency, int64_t in_flight, bool dropped);

  // How often the limit changed (for tests and the log).
  int64_t changes() const { return changes_; }

 private:
  const bool adaptive_;
  const int64_t max_limit_;
  const int64_t min_limit_;
  double limit_;
  absl::Duration no_load_latency_ = absl::InfiniteDuration();
  int64_t samples_since_probe_ = 0;
  int64_t changes_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_CONCURRENCY_LIMITER_H_
