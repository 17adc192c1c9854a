// CircuitBreaker: a processor's processors[].circuit_breaker. Closed, it
// counts the outcomes of the last `window` (in one-second buckets); when
// there are at least min_outcomes and failure_ratio or more of them are
// failures (RETRY, FAIL, timeouts), it opens. Open, nothing is dispatched to
// the processor (events wait in their queues) for open_for; then it is
// half-open: `probes` events may go. When that many succeed it closes (and
// forgets the window); a failure while half-open opens it again for twice
// the previous open time, up to open_max (never under open_for). Outcomes
// that arrive while open (events sent before it opened) change nothing;
// while half-open, every outcome counts as a probe's.
//
// Garbage in the config is tolerated: probes or min_outcomes under 1 act
// as 1, a window under a second as one second, and a failure_ratio of 0
// still needs one failure (a NaN one, or one over 1, never opens).
//
// While it is open or half-open the engine neither counts an attempt for a
// failed event nor dead-letters it: the event goes back to the head of its
// lane (core/engine/engine_results.cc).
//
// Disabled (enabled: false): always closed, and Allowance is unlimited.
//
// Time is passed in, so tests drive it. Threading: not thread-safe; guarded
// by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_CIRCUIT_BREAKER_H_
#define FERRY_CORE_ENGINE_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <deque>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/types.h"

namespace ferry {

class CircuitBreaker {
 public:
  explicit CircuitBreaker(const CircuitBreakerConfig& config);

  bool enabled() const { return config_.enabled; }
  // The state at `now`: an open breaker whose open time is over turns
  // half-open here.
  BreakerState State(absl::Time now);
  // Events that may be dispatched now: INT64_MAX when closed, 0 when open,
  // the probes not yet sent when half-open.
  int64_t Allowance(absl::Time now);
  // `n` events were dispatched (probes, when half-open).
  void OnDispatched(int64_t n);

  // An event's outcome. Returns the state after it, so the caller can tell
  // a transition (and log it once).
  BreakerState OnOutcome(bool success, absl::Time now);

  // When an open breaker turns half-open (InfiniteFuture unless open), for
  // a caller that wants to wake up then.
  absl::Time HalfOpensAt() const;
  // How often it opened since start.
  int64_t opened() const { return opened_; }

 private:
  struct Bucket {
    int64_t second = 0;  // whole seconds since the epoch
    int64_t successes = 0;
    int64_t failures = 0;
  };
  void Open(absl::Time now, absl::Duration for_how_long);
  void Close();
  void Expire(absl::Time now);

  const CircuitBreakerConfig config_;
  BreakerState state_ = BreakerState::kClosed;
  std::deque<Bucket> window_;
  absl::Time half_opens_at_ = absl::InfiniteFuture();
  absl::Duration last_open_for_ = absl::ZeroDuration();
  int64_t probes_sent_ = 0;
  int64_t probes_succeeded_ = 0;
  int64_t opened_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_CIRCUIT_BREAKER_H_
