// DownstreamGuards: what protects the systems a processor's workers call
// (README "Protecting downstream"), one set per processor:
//   * RateLimiter (processors[].rate_limit, or an operator's SetRateLimits):
//     tokens per dispatched event;
//   * ConcurrencyLimiter (processors[].concurrency: adaptive): events the
//     processor's workers may hold together;
//   * CircuitBreaker (processors[].circuit_breaker): no dispatch while open,
//     a few probes when half-open.
// The Dispatcher asks Allowance() how many events a processor may be sent
// now and reports each one sent (OnDispatched); the Engine reports each
// outcome (OnOutcome), which says whether a failure must be spared (given
// back without an attempt, never dead-lettered) because the breaker is not
// closed. Breaker transitions are logged here, once each.
//
// A processor with none of the three configured costs one branch per
// dispatch and per result (active() is false).
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_DOWNSTREAM_GUARD_H_
#define FERRY_CORE_ENGINE_DOWNSTREAM_GUARD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/circuit_breaker.h"
#include "core/engine/concurrency_limiter.h"
#include "core/engine/rate_limiter.h"
#include "core/engine/types.h"

namespace ferry {

// The engine timer's default tick (core/engine/engine_timer.h): besides
// results, when a rate-limited processor is next looked at.
inline constexpr absl::Duration kEngineTimerTick = absl::Milliseconds(20);

class DownstreamGuards {
 public:
  DownstreamGuards(const Config& config, absl::Time now);

  // Whether any guard of `processor` is on (rate limit, adaptive
  // concurrency or breaker); when not, the calls below change nothing.
  bool active(int processor) const { return guards_[Index(processor)].active; }
  // Whether any processor has a guard that waits on time (a rate limit or a
  // breaker): the timer then dispatches on every tick.
  bool any_time_based() const;

  // Events `processor` may be sent now, with `in_flight` of its events at
  // its workers: the least of the rate limiter's tokens, the concurrency
  // limit's room and the breaker's allowance. INT64_MAX when nothing limits.
  int64_t Allowance(int processor, int64_t in_flight, absl::Time now);
  // One event was sent to `processor` (a token, a probe).
  void OnDispatched(int processor);

  enum class Outcome { kOk, kRetry, kFail, kTimeout };
  // An event's outcome, `latency` after its dispatch, with `in_flight` of
  // the processor's events still at its workers. True when it failed and
  // the breaker is open or half-open after it: the event must not count an
  // attempt nor be dead-lettered.
  bool OnOutcome(int processor, Outcome outcome, absl::Duration latency, int64_t in_flight,
                 absl::Time now);

  // Operators' rate limits by processor name (Engine::SetRateLimits).
  void SetRateLimits(const std::map<std::string, RateLimitConfig>& overrides, absl::Time now);

  // Fills the protection fields of `processor`'s snapshot.
  void Fill(int processor, absl::Time now, ProcessorSnapshot* snapshot);

 private:
  struct Guard {
    std::string name;
    RateLimitConfig configured_rate;
    RateLimiter rate;
    bool rate_overridden = false;
    ConcurrencyLimiter concurrency;
    CircuitBreaker breaker;
    int probes = 0;
    BreakerState logged_state = BreakerState::kClosed;
    bool active = false;
  };
  static size_t Index(int processor) { return static_cast<size_t>(processor); }
  void Refresh(Guard& guard);
  // Logs a breaker state change once.
  void NoteState(Guard& guard, BreakerState state);

  std::vector<Guard> guards_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_DOWNSTREAM_GUARD_H_
