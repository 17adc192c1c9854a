#include "core/engine/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ferry {
namespace {

// The window in whole one-second buckets, at least one.
int64_t WindowSeconds(absl::Duration window) {
  if (window == absl::InfiniteDuration()) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(window, absl::Seconds(1))));
}

// The bucket `now` falls in. Times before the epoch floor too.
int64_t SecondOf(absl::Time now) {
  return absl::ToInt64Seconds(
      absl::Floor(now - absl::UnixEpoch(), absl::Seconds(1)));
}

}  // namespace

CircuitBreaker::CircuitBreaker(const CircuitBreakerConfig& config)
    : config_(config) {}

BreakerState CircuitBreaker::State(absl::Time now) {
  if (!config_.enabled) return BreakerState::kClosed;
  if (state_ == BreakerState::kOpen && now >= half_opens_at_) {
    state_ = BreakerState::kHalfOpen;
    half_opens_at_ = absl::InfiniteFuture();
    probes_sent_ = 0;
    probes_succeeded_ = 0;
  }
  return state_;
}

int64_t CircuitBreaker::Allowance(absl::Time now) {
  switch (State(now)) {
    case BreakerState::kClosed:
      return std::numeric_limits<int64_t>::max();
    case BreakerState::kOpen:
      return 0;
    case BreakerState::kHalfOpen:
      // probes <= 0 in a config still sends one: a breaker that could never
      // probe would stay half-open for good.
      return std::max<int64_t>(0, std::max(1, config_.probes) - probes_sent_);
  }
  return 0;
}

void CircuitBreaker::OnDispatched(int64_t n) {
  if (!config_.enabled || state_ != BreakerState::kHalfOpen || n <= 0) return;
  probes_sent_ += n;
}

BreakerState CircuitBreaker::OnOutcome(bool success, absl::Time now) {
  const BreakerState state = State(now);
  switch (state) {
    case BreakerState::kOpen:
      // Events sent before it opened: they say nothing new.
      return state;
    case BreakerState::kHalfOpen:
      if (!success) {
        // Twice the last open time, up to open_max (but never under
        // open_for, whatever open_max says).
        const absl::Duration cap = std::max(config_.open_max, config_.open_for);
        Open(now, std::min(cap, last_open_for_ * 2));
      } else if (++probes_succeeded_ >= std::max(1, config_.probes)) {
        Close();
      }
      return state_;
    case BreakerState::kClosed:
      break;
  }
  if (!config_.enabled) return BreakerState::kClosed;
  Expire(now);
  const int64_t second = SecondOf(now);
  // A clock that stepped back files the outcome in the newest bucket, so
  // the buckets stay in order.
  if (window_.empty() || window_.back().second < second) {
    window_.push_back(Bucket{second, 0, 0});
  }
  Bucket& bucket = window_.back();
  ++(success ? bucket.successes : bucket.failures);
  int64_t successes = 0;
  int64_t failures = 0;
  for (const Bucket& b : window_) {
    successes += b.successes;
    failures += b.failures;
  }
  const int64_t total = successes + failures;
  // failures > 0: a ratio of 0 (or less) must not open a breaker on
  // successes alone. A NaN ratio compares false and never opens it.
  if (total >= std::max(1, config_.min_outcomes) && failures > 0 &&
      static_cast<double>(failures) >=
          config_.failure_ratio * static_cast<double>(total)) {
    Open(now, config_.open_for);
  }
  return state_;
}

absl::Time CircuitBreaker::HalfOpensAt() const {
  if (!config_.enabled || state_ != BreakerState::kOpen) {
    return absl::InfiniteFuture();
  }
  return half_opens_at_;
}

void CircuitBreaker::Open(absl::Time now, absl::Duration for_how_long) {
  for_how_long = std::max(absl::ZeroDuration(), for_how_long);
  state_ = BreakerState::kOpen;
  half_opens_at_ = now + for_how_long;
  last_open_for_ = for_how_long;
  probes_sent_ = 0;
  probes_succeeded_ = 0;
  window_.clear();
  ++opened_;
}

void CircuitBreaker::Close() {
  state_ = BreakerState::kClosed;
  window_.clear();
  last_open_for_ = absl::ZeroDuration();
  half_opens_at_ = absl::InfiniteFuture();
  probes_sent_ = 0;
  probes_succeeded_ = 0;
}

void CircuitBreaker::Expire(absl::Time now) {
  const int64_t window = WindowSeconds(config_.window);
  const int64_t second = SecondOf(now);
  // Buckets at or before `second - window` are out; with a window of
  // int64 seconds, or at the infinite past, nothing is (and the subtraction
  // must not overflow).
  if (window == std::numeric_limits<int64_t>::max()) return;
  if (second < std::numeric_limits<int64_t>::min() + window) return;
  while (!window_.empty() && window_.front().second <= second - window) {
    window_.pop_front();
  }
}

}  // namespace ferry
