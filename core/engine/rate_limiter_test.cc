#include "core/engine/rate_limiter.h"

#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

RateLimitConfig Rate(double events_per_second, int64_t burst = 0) {
  RateLimitConfig config;
  config.events_per_second = events_per_second;
  config.burst = burst;
  return config;
}

TEST(RateLimiterTest, UnlimitedUntilConfigured) {
  RateLimiter limiter;
  EXPECT_FALSE(limiter.limited());
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
  limiter.Take(1'000'000);
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
  EXPECT_EQ(limiter.NextTokenAt(), absl::InfiniteFuture());
}

TEST(RateLimiterTest, ZeroRateIsUnlimited) {
  RateLimiter limiter;
  limiter.Configure(Rate(0, 5), kStart);
  EXPECT_FALSE(limiter.limited());
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
}

TEST(RateLimiterTest, NegativeAndNanRatesAreUnlimited) {
  RateLimiter limiter;
  limiter.Configure(Rate(-5, 5), kStart);
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
  limiter.Configure(Rate(std::numeric_limits<double>::quiet_NaN(), 5), kStart);
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
}

TEST(RateLimiterTest, FirstConfigureStartsWithAFullBucket) {
  RateLimiter limiter;
  limiter.Configure(Rate(200, 20), kStart);
  EXPECT_TRUE(limiter.limited());
  EXPECT_EQ(limiter.Available(kStart), 20);
  EXPECT_EQ(limiter.NextTokenAt(), absl::InfinitePast());
}

TEST(RateLimiterTest, DefaultBurstIsATenthOfTheRate) {
  RateLimiter limiter;
  limiter.Configure(Rate(200), kStart);
  EXPECT_EQ(limiter.Available(kStart), 20);
  limiter = RateLimiter();
  limiter.Configure(Rate(3), kStart);
  EXPECT_EQ(limiter.Available(kStart), 1);
}

TEST(RateLimiterTest, RefillRateIsExactOverTwentySeconds) {
  RateLimiter limiter;
  limiter.Configure(Rate(200, 20), kStart);
  int64_t taken = 0;
  // A greedy caller polling every 3 ms (an interval that does not divide a
  // token's 5 ms) for 20 simulated seconds.
  for (absl::Time now = kStart; now <= kStart + absl::Seconds(20);
       now += absl::Milliseconds(3)) {
    const int64_t available = limiter.Available(now);
    limiter.Take(available);
    taken += available;
  }
  // The initial burst plus 20 s x 200/s.
  EXPECT_NEAR(taken, 20 + 20 * 200, 1);
}

TEST(RateLimiterTest, FractionalRateIsExact) {
  RateLimiter limiter;
  limiter.Configure(Rate(0.5, 1), kStart);
  ASSERT_EQ(limiter.Available(kStart), 1);
  limiter.Take(1);
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(1999)), 0);
  EXPECT_EQ(limiter.Available(kStart + absl::Seconds(2)), 1);
  limiter.Take(1);
  int64_t taken = 0;
  for (absl::Time now = kStart + absl::Seconds(2);
       now <= kStart + absl::Seconds(102); now += absl::Milliseconds(100)) {
    const int64_t available = limiter.Available(now);
    limiter.Take(available);
    taken += available;
  }
  EXPECT_EQ(taken, 50);
}

TEST(RateLimiterTest, LongIdleFillsOnlyToTheBurst) {
  RateLimiter limiter;
  limiter.Configure(Rate(100, 7), kStart);
  limiter.Take(7);
  EXPECT_EQ(limiter.Available(kStart + absl::Hours(24 * 365)), 7);
}

TEST(RateLimiterTest, ReconfigureKeepsTokensCappedAtTheNewBurst) {
  RateLimiter limiter;
  limiter.Configure(Rate(100, 50), kStart);
  limiter.Take(10);  // 40 left
  limiter.Configure(Rate(10, 5), kStart);
  EXPECT_EQ(limiter.Available(kStart), 5);
  limiter.Take(5);
  // A bigger burst later does not fill the bucket: the tokens held are kept.
  limiter.Configure(Rate(10, 100), kStart);
  EXPECT_EQ(limiter.Available(kStart), 0);
  EXPECT_EQ(limiter.Available(kStart + absl::Seconds(1)), 10);
}

TEST(RateLimiterTest, ReconfigureCreditsTheOldRateUpToNow) {
  RateLimiter limiter;
  limiter.Configure(Rate(100, 100), kStart);
  limiter.Take(100);
  // Half a second at 100/s, then the rate drops to 1/s.
  limiter.Configure(Rate(1, 100), kStart + absl::Milliseconds(500));
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(500)), 50);
}

TEST(RateLimiterTest, LimitAfterNoLimitStartsFull) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, 10), kStart);
  limiter.Take(10);
  limiter.Configure(Rate(0), kStart);  // lifted
  EXPECT_EQ(limiter.Available(kStart), kUnlimited);
  limiter.Configure(Rate(10, 10), kStart + absl::Milliseconds(1));
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(1)), 10);
}

TEST(RateLimiterTest, NextTokenAtIsWhenTheTokenIsDue) {
  RateLimiter limiter;
  limiter.Configure(Rate(4, 1), kStart);
  limiter.Take(1);
  EXPECT_EQ(limiter.NextTokenAt(), kStart + absl::Milliseconds(250));
  // Part of the way there: due at the same time.
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(100)), 0);
  EXPECT_EQ(limiter.NextTokenAt(), kStart + absl::Milliseconds(250));
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(250)), 1);
  EXPECT_EQ(limiter.NextTokenAt(), absl::InfinitePast());
}

TEST(RateLimiterTest, NextTokenAtIsNeverEarly) {
  // Rates whose token interval is not a whole number of microseconds.
  for (double rate : {3.0, 7.0, 0.3, 13.7, 999.0, 1e6 / 3}) {
    RateLimiter limiter;
    limiter.Configure(Rate(rate, 1), kStart);
    absl::Time now = kStart;
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(limiter.Available(now), 1) << "rate " << rate << " token " << i;
      limiter.Take(1);
      now = limiter.NextTokenAt();
      ASSERT_GT(now, kStart);
    }
  }
}

TEST(RateLimiterTest, TakingMoreThanAvailableIsRepaidFirst) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, 10), kStart);
  limiter.Take(15);  // five in debt
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(499)), 0);
  EXPECT_EQ(limiter.NextTokenAt(), kStart + absl::Milliseconds(600));
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(600)), 1);
}

TEST(RateLimiterTest, HugeRate) {
  RateLimiter limiter;
  limiter.Configure(Rate(1e9), kStart);
  EXPECT_EQ(limiter.Available(kStart), 100'000'000);
  limiter.Take(100'000'000);
  EXPECT_EQ(limiter.Available(kStart + absl::Microseconds(1)), 1000);
  EXPECT_EQ(limiter.Available(kStart + absl::Hours(1)), 100'000'000);
}

TEST(RateLimiterTest, InfiniteAndAstronomicalRatesDoNotCrash) {
  for (double rate : {std::numeric_limits<double>::infinity(), 1e300}) {
    RateLimiter limiter;
    limiter.Configure(Rate(rate), kStart);
    const int64_t full = limiter.Available(kStart);
    EXPECT_GT(full, 1'000'000'000'000LL);
    limiter.Take(full);
    EXPECT_EQ(limiter.Available(kStart + absl::Nanoseconds(1)), full);
  }
}

TEST(RateLimiterTest, HugeBurst) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, std::numeric_limits<int64_t>::max()), kStart);
  const int64_t full = limiter.Available(kStart);
  EXPECT_GT(full, 8'000'000'000'000'000'000LL);
  limiter.Take(full);
  EXPECT_EQ(limiter.Available(kStart + absl::Seconds(1)), 10);
}

TEST(RateLimiterTest, TimeGoingBackwardsAddsNothing) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, 10), kStart);
  limiter.Take(10);
  EXPECT_EQ(limiter.Available(kStart + absl::Seconds(1)), 10);
  limiter.Take(10);
  EXPECT_EQ(limiter.Available(kStart), 0);
  EXPECT_EQ(limiter.Available(kStart - absl::Hours(1)), 0);
  // Forward again: the second already credited is not credited twice.
  EXPECT_EQ(limiter.Available(kStart + absl::Seconds(1)), 0);
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(1500)), 5);
  // A reconfigure with a time in the past does not move the clock back.
  limiter.Configure(Rate(10, 10), kStart);
  EXPECT_EQ(limiter.Available(kStart + absl::Milliseconds(1500)), 5);
}

TEST(RateLimiterTest, InfiniteTimesDoNotCrash) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, 10), kStart);
  limiter.Take(10);
  EXPECT_EQ(limiter.Available(absl::InfinitePast()), 0);
  EXPECT_EQ(limiter.Available(absl::InfiniteFuture()), 10);
}

TEST(RateLimiterTest, TakeOfZeroOrNegativeChangesNothing) {
  RateLimiter limiter;
  limiter.Configure(Rate(10, 10), kStart);
  limiter.Take(0);
  limiter.Take(-5);
  EXPECT_EQ(limiter.Available(kStart), 10);
}

// Takes every whole token at each poll, `poll` apart, for `seconds`.
int64_t TakenWhenPolled(RateLimiter& limiter, absl::Duration poll, int seconds) {
  int64_t taken = 0;
  for (absl::Time t = kStart; t < kStart + absl::Seconds(seconds); t += poll) {
    const int64_t n = limiter.Available(t);
    limiter.Take(n);
    taken += n;
  }
  return taken;
}

TEST(RateLimiterTest, PollSlackKeepsTheRateWhenPolledLateWithASmallBurst) {
  const RateLimitConfig config{20, 1};  // 20/s, burst 1: a token every 50 ms
  // Polled every 20 ms (the engine's tick), a token due at 50 ms is seen at
  // 60 ms; without slack the bucket sat full meanwhile and lost the 10 ms.
  RateLimiter capped;
  capped.Configure(config, kStart);
  EXPECT_LE(TakenWhenPolled(capped, absl::Milliseconds(20), 10), 170);
  RateLimiter slack(absl::Milliseconds(20));
  slack.Configure(config, kStart);
  const int64_t taken = TakenWhenPolled(slack, absl::Milliseconds(20), 10);
  EXPECT_GE(taken, 200);  // 1 at the start + 20/s for 10 s
  EXPECT_LE(taken, 201);
}

TEST(RateLimiterTest, PollSlackAddsAtMostRateTimesSlackToABurst) {
  RateLimiter limiter(absl::Milliseconds(20));
  limiter.Configure({1000, 5}, kStart);  // slack: 1000/s x 20 ms = 20 tokens
  EXPECT_EQ(limiter.Available(kStart), 5);  // a full bucket is the burst
  EXPECT_EQ(limiter.Available(kStart + absl::Hours(1)), 25);
}

}  // namespace
}  // namespace ferry
