// RateLimiter: a processor's processors[].rate_limit, a token bucket read at
// dispatch. The bucket refills at events_per_second up to its burst; each
// event dispatched takes a token, and an event that finds none stays queued
// (nothing is dropped; fetching pauses through the usual budgets when the
// backlog grows). Unlimited (every call a no-op) when events_per_second is 0.
//
// Tokens are fractional internally, so a rate under one per tick is exact
// over time. Time is passed in (no clock of its own), so tests drive it.
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_RATE_LIMITER_H_
#define FERRY_CORE_ENGINE_RATE_LIMITER_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/config/config.h"

namespace ferry {

class RateLimiter {
 public:
  // Unlimited until Configure. `poll_slack`: how late after a token is due
  // the caller may look (the engine dispatches on results and on its timer
  // tick). The bucket holds up to rate x poll_slack beyond the burst while
  // refilling, so a token earned while the bucket was full and the caller
  // not yet looking is not lost to the cap: without it a burst of 1 at 20/s
  // polled every 20 ms gave 16.7/s (a token every 60 ms, not 50). A full
  // bucket at Configure holds the burst only.
  explicit RateLimiter(absl::Duration poll_slack = absl::ZeroDuration())
      : poll_slack_seconds_(absl::ToDoubleSeconds(poll_slack)) {}

  // Sets the rate and burst (an operator's change at run time, or the
  // config at start). A limit starts with a full bucket the first time, and
  // when it follows no limit (an unlimited bucket is full); a change from one
  // limit to another keeps the tokens held, capped at the new burst.
  void Configure(const RateLimitConfig& config, absl::Time now);

  bool limited() const { return config_.limited(); }
  const RateLimitConfig& config() const { return config_; }

  // Whole tokens available at `now` (after refilling); INT64_MAX when
  // unlimited.
  int64_t Available(absl::Time now);
  // Takes `n` tokens (n <= Available(now) of the same `now`; more leaves
  // the bucket in debt, repaid by the refill before the next token).
  void Take(int64_t n);
  // When the next whole token is due, for a caller that wants to wake up
  // then; InfinitePast when one is available, InfiniteFuture when unlimited.
  absl::Time NextTokenAt() const;

 private:
  void Refill(absl::Time now);

  double poll_slack_seconds_ = 0;
  RateLimitConfig config_;
  double tokens_ = 0;
  absl::Time refilled_at_ = absl::InfinitePast();
  bool configured_ = false;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_RATE_LIMITER_H_
