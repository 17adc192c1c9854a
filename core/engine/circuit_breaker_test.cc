#include "core/engine/circuit_breaker.h"

#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/types.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

CircuitBreakerConfig On() {
  CircuitBreakerConfig config;
  config.enabled = true;  // ratio 0.5, min 20, window 10 s, 1 s..30 s, 3 probes
  return config;
}

// `failures` failures and `successes` successes, all at `now`; the state
// after the last.
BreakerState Outcomes(CircuitBreaker& breaker, int failures, int successes,
                      absl::Time now) {
  BreakerState state = breaker.State(now);
  for (int i = 0; i < successes; ++i) state = breaker.OnOutcome(true, now);
  for (int i = 0; i < failures; ++i) state = breaker.OnOutcome(false, now);
  return state;
}

// Opens `breaker` (default config) at `now`.
void Trip(CircuitBreaker& breaker, absl::Time now) {
  ASSERT_EQ(Outcomes(breaker, 20, 0, now), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, DisabledIsAlwaysClosedAndUnlimited) {
  CircuitBreaker breaker{CircuitBreakerConfig{}};
  EXPECT_FALSE(breaker.enabled());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(breaker.OnOutcome(false, kStart), BreakerState::kClosed);
  }
  EXPECT_EQ(breaker.State(kStart), BreakerState::kClosed);
  EXPECT_EQ(breaker.Allowance(kStart), kUnlimited);
  breaker.OnDispatched(5);
  EXPECT_EQ(breaker.Allowance(kStart), kUnlimited);
  EXPECT_EQ(breaker.HalfOpensAt(), absl::InfiniteFuture());
  EXPECT_EQ(breaker.opened(), 0);
}

TEST(CircuitBreakerTest, ClosedIsUnlimited) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(breaker.State(kStart), BreakerState::kClosed);
  EXPECT_EQ(breaker.Allowance(kStart), kUnlimited);
  EXPECT_EQ(breaker.HalfOpensAt(), absl::InfiniteFuture());
}

TEST(CircuitBreakerTest, OpensExactlyAtMinOutcomesWithTheRatio) {
  CircuitBreaker breaker(On());
  // 19 outcomes, 10 of them failures: over the ratio, under min_outcomes.
  EXPECT_EQ(Outcomes(breaker, 10, 9, kStart), BreakerState::kClosed);
  // The 20th: 10 of 20 failed, exactly the ratio.
  EXPECT_EQ(breaker.OnOutcome(true, kStart), BreakerState::kOpen);
  EXPECT_EQ(breaker.opened(), 1);
  EXPECT_EQ(breaker.Allowance(kStart), 0);
  EXPECT_EQ(breaker.HalfOpensAt(), kStart + absl::Seconds(1));
}

TEST(CircuitBreakerTest, UnderTheRatioStaysClosed) {
  CircuitBreaker breaker(On());
  // 9 of 20 failed.
  EXPECT_EQ(Outcomes(breaker, 9, 11, kStart), BreakerState::kClosed);
  // 49 of 100.
  EXPECT_EQ(Outcomes(breaker, 40, 40, kStart), BreakerState::kClosed);
  EXPECT_EQ(breaker.opened(), 0);
}

TEST(CircuitBreakerTest, BelowMinOutcomesNeverOpens) {
  CircuitBreaker breaker(On());
  // Nothing but failures, but one every 600 ms: at most 17 in any ten
  // seconds' buckets, under min_outcomes for good.
  absl::Time now = kStart;
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(breaker.OnOutcome(false, now), BreakerState::kClosed) << i;
    now += absl::Milliseconds(600);
  }
  EXPECT_EQ(breaker.opened(), 0);
}

TEST(CircuitBreakerTest, OldBucketsOutsideTheWindowAreForgotten) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(Outcomes(breaker, 19, 0, kStart), BreakerState::kClosed);
  // Ten seconds on, those 19 are out of the window: one more is one.
  EXPECT_EQ(breaker.OnOutcome(false, kStart + absl::Seconds(10)),
            BreakerState::kClosed);
  EXPECT_EQ(Outcomes(breaker, 18, 0, kStart + absl::Seconds(10)),
            BreakerState::kClosed);
  // Nine seconds on they still count: 19 + 1 opens it.
  CircuitBreaker other(On());
  EXPECT_EQ(Outcomes(other, 19, 0, kStart), BreakerState::kClosed);
  EXPECT_EQ(other.OnOutcome(false, kStart + absl::Seconds(9)),
            BreakerState::kOpen);
}

TEST(CircuitBreakerTest, OldSuccessesAreForgottenToo) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(Outcomes(breaker, 0, 1000, kStart), BreakerState::kClosed);
  // With the successes in the window, 20 failures are 2%.
  EXPECT_EQ(Outcomes(breaker, 20, 0, kStart + absl::Seconds(5)),
            BreakerState::kClosed);
  // Once they are out of it, 20 more are 40 of 40.
  EXPECT_EQ(Outcomes(breaker, 20, 0, kStart + absl::Seconds(11)),
            BreakerState::kOpen);
}

TEST(CircuitBreakerTest, OpenTurnsHalfOpenAfterOpenFor) {
  CircuitBreaker breaker(On());
  Trip(breaker, kStart);
  EXPECT_EQ(breaker.State(kStart + absl::Milliseconds(999)), BreakerState::kOpen);
  EXPECT_EQ(breaker.Allowance(kStart + absl::Milliseconds(999)), 0);
  EXPECT_EQ(breaker.State(kStart + absl::Seconds(1)), BreakerState::kHalfOpen);
  EXPECT_EQ(breaker.HalfOpensAt(), absl::InfiniteFuture());
}

TEST(CircuitBreakerTest, ProbesCountDownAsTheyAreDispatched) {
  CircuitBreaker breaker(On());
  Trip(breaker, kStart);
  const absl::Time later = kStart + absl::Seconds(1);
  EXPECT_EQ(breaker.Allowance(later), 3);
  breaker.OnDispatched(1);
  EXPECT_EQ(breaker.Allowance(later), 2);
  breaker.OnDispatched(2);
  EXPECT_EQ(breaker.Allowance(later), 0);
  breaker.OnDispatched(5);  // more than allowed: still none, not negative
  EXPECT_EQ(breaker.Allowance(later), 0);
  EXPECT_EQ(breaker.State(later), BreakerState::kHalfOpen);
}

TEST(CircuitBreakerTest, AllProbesSucceedClosesWithACleanWindow) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(Outcomes(breaker, 19, 0, kStart), BreakerState::kClosed);
  EXPECT_EQ(breaker.OnOutcome(false, kStart + absl::Milliseconds(500)),
            BreakerState::kOpen);
  const absl::Time later = kStart + absl::Seconds(2);
  ASSERT_EQ(breaker.Allowance(later), 3);
  breaker.OnDispatched(3);
  EXPECT_EQ(breaker.OnOutcome(true, later), BreakerState::kHalfOpen);
  EXPECT_EQ(breaker.OnOutcome(true, later), BreakerState::kHalfOpen);
  EXPECT_EQ(breaker.OnOutcome(true, later), BreakerState::kClosed);
  EXPECT_EQ(breaker.Allowance(later), kUnlimited);
  // Clean: the failures before it opened are not in the window (still
  // within ten seconds of them), so 19 new failures do not open it.
  EXPECT_EQ(Outcomes(breaker, 19, 0, later), BreakerState::kClosed);
  EXPECT_EQ(breaker.OnOutcome(false, later), BreakerState::kOpen);
  // And the open time starts from open_for again.
  EXPECT_EQ(breaker.HalfOpensAt(), later + absl::Seconds(1));
  EXPECT_EQ(breaker.opened(), 2);
}

TEST(CircuitBreakerTest, AProbeFailureReopensForTwiceAsLongCappedAtOpenMax) {
  CircuitBreakerConfig config = On();
  config.open_max = absl::Seconds(5);
  CircuitBreaker breaker(config);
  absl::Time now = kStart;
  Trip(breaker, now);
  EXPECT_EQ(breaker.HalfOpensAt(), now + absl::Seconds(1));
  const absl::Duration expected[] = {absl::Seconds(2), absl::Seconds(4),
                                     absl::Seconds(5), absl::Seconds(5)};
  for (absl::Duration open_for : expected) {
    now = breaker.HalfOpensAt();
    ASSERT_EQ(breaker.Allowance(now), 3);
    breaker.OnDispatched(1);
    // One success, then a failure: open again.
    EXPECT_EQ(breaker.OnOutcome(true, now), BreakerState::kHalfOpen);
    EXPECT_EQ(breaker.OnOutcome(false, now), BreakerState::kOpen);
    EXPECT_EQ(breaker.HalfOpensAt(), now + open_for);
  }
  EXPECT_EQ(breaker.opened(), 5);
}

TEST(CircuitBreakerTest, OutcomesWhileOpenChangeNothing) {
  CircuitBreaker breaker(On());
  Trip(breaker, kStart);
  const absl::Time during = kStart + absl::Milliseconds(500);
  EXPECT_EQ(Outcomes(breaker, 100, 0, during), BreakerState::kOpen);
  EXPECT_EQ(Outcomes(breaker, 0, 100, during), BreakerState::kOpen);
  EXPECT_EQ(breaker.HalfOpensAt(), kStart + absl::Seconds(1));
  EXPECT_EQ(breaker.opened(), 1);
  // Half-open on time with its full probes.
  EXPECT_EQ(breaker.Allowance(kStart + absl::Seconds(1)), 3);
}

TEST(CircuitBreakerTest, TimeGoingBackwardsDoesNotCrashOrReorder) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(Outcomes(breaker, 10, 0, kStart + absl::Seconds(5)),
            BreakerState::kClosed);
  // Filed in the newest bucket: they still count with the others.
  EXPECT_EQ(Outcomes(breaker, 10, 0, kStart), BreakerState::kOpen);
  // An open breaker asked about the past stays open.
  EXPECT_EQ(breaker.State(kStart - absl::Hours(1)), BreakerState::kOpen);
  EXPECT_EQ(breaker.State(absl::InfinitePast()), BreakerState::kOpen);
  EXPECT_EQ(breaker.State(absl::InfiniteFuture()), BreakerState::kHalfOpen);
}

TEST(CircuitBreakerTest, InfiniteTimesDoNotCrash) {
  CircuitBreaker breaker(On());
  EXPECT_EQ(Outcomes(breaker, 5, 5, absl::InfinitePast()), BreakerState::kClosed);
  EXPECT_EQ(Outcomes(breaker, 5, 5, absl::InfiniteFuture()),
            BreakerState::kClosed);
}

TEST(CircuitBreakerTest, GarbageConfigDoesNotMisbehave) {
  // A ratio of 0 must not open on successes alone.
  CircuitBreakerConfig zero = On();
  zero.failure_ratio = 0;
  CircuitBreaker zero_breaker(zero);
  EXPECT_EQ(Outcomes(zero_breaker, 0, 100, kStart), BreakerState::kClosed);
  EXPECT_EQ(zero_breaker.OnOutcome(false, kStart), BreakerState::kOpen);
  // A ratio above 1, or NaN, never opens.
  for (double ratio : {1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CircuitBreakerConfig config = On();
    config.failure_ratio = ratio;
    CircuitBreaker breaker(config);
    EXPECT_EQ(Outcomes(breaker, 1000, 0, kStart), BreakerState::kClosed);
  }
  // No probes configured still sends one, so it can close again.
  CircuitBreakerConfig no_probes = On();
  no_probes.probes = 0;
  no_probes.min_outcomes = 0;
  no_probes.window = absl::ZeroDuration();
  CircuitBreaker breaker(no_probes);
  EXPECT_EQ(breaker.OnOutcome(false, kStart), BreakerState::kOpen);
  EXPECT_EQ(breaker.Allowance(kStart + absl::Seconds(1)), 1);
  breaker.OnDispatched(1);
  EXPECT_EQ(breaker.OnOutcome(true, kStart + absl::Seconds(1)),
            BreakerState::kClosed);
  // open_max under open_for: open_for still holds.
  CircuitBreakerConfig short_max = On();
  short_max.open_max = absl::Milliseconds(10);
  CircuitBreaker capped(short_max);
  Trip(capped, kStart);
  EXPECT_EQ(capped.HalfOpensAt(), kStart + absl::Seconds(1));
  EXPECT_EQ(capped.OnOutcome(false, kStart + absl::Seconds(1)),
            BreakerState::kOpen);
  EXPECT_EQ(capped.HalfOpensAt(), kStart + absl::Seconds(2));
}

}  // namespace
}  // namespace ferry
