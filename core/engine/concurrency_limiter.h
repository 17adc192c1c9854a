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
// The limit moves at most once per window of `limit` samples (about one
// round trip: the events sent under one limit come back), from the window's
// mean latency and its highest in-flight count, after Netflix's
// WindowedLimit. Moving on every sample let the results of events sent under
// an older, lower limit pile steps up before any feedback from the new one
// arrived (an end-to-end test saw 6 -> 30 within 5 samples and a p99 at 3.5x
// the unloaded latency).
//
// The steps scale with log10 of the limit (at least 1, so a small limit
// moves): a queue of at most log10(limit) grows it by 6 x log10(limit), one
// under 3 x log10(limit) by log10(limit), one over 6 x log10(limit) shrinks
// it by log10(limit). A drop cuts it to 0.9 x (multiplicative decrease, as
// in AIMD), whatever the latency, at most once per window (like TCP, once
// per round trip).
//
// The limit grows only while the limit is in use (in flight at least half
// of it), so an idle processor does not inflate it. The no-load latency is
// forgotten every max(100, 30 x limit) samples and re-learnt, so a
// downstream that got slower for good does not hold the limit down forever.
// Re-learning it under full load would take the loaded latency for the
// unloaded one and ratchet the limit up at every probe, so (like BBR's
// ProbeRTT) a probe halves the limit, waits for the in-flight events to drain
// to it (at most one old limit's worth of samples), takes the lowest latency
// of the next half-limit samples as the no-load latency, and the limit grows
// back from there.
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
  enum class Probe { kNone, kDraining, kLearning };

  void SetLimit(double limit);
  void StartProbe();
  void OnProbeSample(absl::Duration latency, int64_t in_flight);
  // The Vegas step, from a full window.
  void Step(absl::Duration latency, int64_t in_flight);

  const bool adaptive_;
  const int64_t max_limit_;
  const int64_t min_limit_;
  double limit_;
  absl::Duration no_load_latency_ = absl::InfiniteDuration();
  int64_t samples_since_probe_ = 0;
  int64_t changes_ = 0;
  // The window under way: its samples, their latency sum and the most in
  // flight; and the samples since the last cut for a drop.
  int64_t window_samples_ = 0;
  absl::Duration window_latency_ = absl::ZeroDuration();
  int64_t window_in_flight_ = 0;
  int64_t samples_since_cut_ = -1;  // -1: no cut yet
  // A probe under way: the halved limit it waits for, the samples it may
  // still take in its stage, and the lowest latency it learnt so far.
  Probe probe_ = Probe::kNone;
  int64_t probe_target_ = 0;
  int64_t probe_samples_left_ = 0;
  absl::Duration probe_min_ = absl::InfiniteDuration();
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_CONCURRENCY_LIMITER_H_
