#include "core/engine/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ferry {
namespace {

// Floating error in elapsed x rate can leave a token at 0.9999999 at the
// very time NextTokenAt promised it; this much short of a whole token counts
// as the whole token, so a caller that wakes then is not woken for nothing.
constexpr double kTokenSlack = 1e-9;

// The bucket's size. EffectiveBurst divides the rate by ten and converts to
// an integer, which is undefined for a rate beyond int64 (or infinite); such
// a rate is as good as unlimited, so its bucket is as big as an int64 holds
// (a little less: 2^63 as a double does not convert back to an int64).
constexpr double kMaxBurst = 9e18;
double BurstOf(const RateLimitConfig& config) {
  if (config.burst > 0) {
    return std::min(kMaxBurst, static_cast<double>(config.burst));
  }
  if (!std::isfinite(config.events_per_second) ||
      config.events_per_second / 10 >= kMaxBurst) {
    return kMaxBurst;
  }
  return static_cast<double>(config.EffectiveBurst());
}

}  // namespace

void RateLimiter::Configure(const RateLimitConfig& config, absl::Time now) {
  const bool was_limited = configured_ && config_.limited();
  if (was_limited) Refill(now);  // tokens earned under the old rate
  config_ = config;
  configured_ = true;
  if (!config_.limited()) return;
  const double burst = BurstOf(config_);
  // The first limit (or one after none: an unlimited bucket was full) starts
  // full; a change of a limit keeps what was held, capped at the new burst.
  if (!was_limited) {
    tokens_ = burst;
    refilled_at_ = now;
  } else if (tokens_ > burst) {
    tokens_ = burst;
  }
}

void RateLimiter::Refill(absl::Time now) {
  // Time that went backwards adds nothing, and the bucket keeps the later
  // time, so going forward again does not earn the same interval twice.
  if (now <= refilled_at_) return;
  const double slack = config_.events_per_second * poll_slack_seconds_;
  const double burst = std::min(kMaxBurst, BurstOf(config_) + (std::isfinite(slack) ? slack : 0));
  const double seconds = absl::ToDoubleSeconds(now - refilled_at_);
  refilled_at_ = now;
  const double earned = seconds * config_.events_per_second;
  // Written so that an infinite or NaN product fills the bucket rather than
  // poisoning it.
  if (!(earned < burst - tokens_)) {
    tokens_ = burst;
  } else {
    tokens_ += earned;
  }
}

int64_t RateLimiter::Available(absl::Time now) {
  if (!limited()) return std::numeric_limits<int64_t>::max();
  Refill(now);
  if (tokens_ <= 0) return 0;
  return static_cast<int64_t>(std::floor(tokens_ + kTokenSlack));
}

void RateLimiter::Take(int64_t n) {
  if (!limited() || n <= 0) return;
  // A caller that takes more than Available said owes the difference: the
  // bucket goes negative and refills from there, so the rate still holds.
  tokens_ -= static_cast<double>(n);
}

absl::Time RateLimiter::NextTokenAt() const {
  if (!limited()) return absl::InfiniteFuture();
  const double missing = 1 - tokens_;
  if (missing <= kTokenSlack) return absl::InfinitePast();
  const double seconds = missing / config_.events_per_second;
  // Rounded up to the next microsecond: never early.
  const absl::Duration wait =
      absl::Ceil(absl::Seconds(seconds), absl::Microseconds(1));
  return refilled_at_ + wait;
}

}  // namespace ferry
