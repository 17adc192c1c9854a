#include "clients/cpp/examples/downstream_sim.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ferry::examples {
namespace {

TEST(LatencyHistogramTest, EmptyHasNoQuantiles) {
  LatencyHistogram histogram;
  EXPECT_EQ(histogram.count(), 0);
  EXPECT_EQ(histogram.QuantileMicros(0.5), 0);
  EXPECT_EQ(histogram.QuantileMicros(0.99), 0);
}

TEST(LatencyHistogramTest, QuantilesAreWithinTwoPercent) {
  LatencyHistogram histogram;
  for (int us = 1; us <= 10000; ++us) histogram.Record(absl::Microseconds(us));
  EXPECT_EQ(histogram.count(), 10000);
  EXPECT_NEAR(histogram.QuantileMicros(0.5), 5000, 5000 * 0.02);
  EXPECT_NEAR(histogram.QuantileMicros(0.99), 9900, 9900 * 0.02);
  EXPECT_NEAR(histogram.QuantileMicros(1.0), 10000, 10000 * 0.02);
}

TEST(LatencyHistogramTest, ATailOfOnePercentMovesP99NotP50) {
  LatencyHistogram histogram;
  for (int i = 0; i < 980; ++i) histogram.Record(absl::Milliseconds(5));
  for (int i = 0; i < 20; ++i) histogram.Record(absl::Milliseconds(300));
  EXPECT_NEAR(histogram.QuantileMicros(0.5), 5000, 100);
  EXPECT_NEAR(histogram.QuantileMicros(0.99), 300000, 6000);
}

TEST(LatencyHistogramTest, ZeroNegativeAndHugeLatenciesAreKept) {
  LatencyHistogram histogram;
  histogram.Record(absl::ZeroDuration());
  histogram.Record(absl::Microseconds(-5));
  histogram.Record(absl::Hours(24 * 365 * 100));
  histogram.Record(absl::InfiniteDuration());
  EXPECT_EQ(histogram.count(), 4);
  EXPECT_LE(histogram.QuantileMicros(0.5), 2);
  EXPECT_GT(histogram.QuantileMicros(1.0), int64_t{1000000000});
}

TEST(OutageTest, DownForItsDurationFromTheFirstCall) {
  Outage outage(absl::Seconds(10));
  const absl::Time first = absl::FromUnixSeconds(1000000);
  EXPECT_TRUE(outage.Down(first));
  EXPECT_TRUE(outage.Down(first + absl::Seconds(10) - absl::Nanoseconds(1)));
  EXPECT_FALSE(outage.Down(first + absl::Seconds(10)));
  EXPECT_FALSE(outage.Down(first + absl::Hours(1)));
}

TEST(OutageTest, ZeroOrNegativeIsNeverDown) {
  Outage none(absl::ZeroDuration());
  Outage negative(absl::Seconds(-1));
  EXPECT_FALSE(none.Down(absl::Now()));
  EXPECT_FALSE(negative.Down(absl::Now()));
}

// Runs `calls` calls of `work` on their own threads; the wall time.
absl::Duration CallAtOnce(SimulatedPool& pool, int calls, absl::Duration work) {
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int i = 0; i < calls; ++i) threads.emplace_back([&] { pool.Call(work); });
  for (std::thread& t : threads) t.join();
  return absl::Now() - start;
}

TEST(SimulatedPoolTest, CallsBeyondThePoolWaitForASlot) {
  // Six calls through two slots take three rounds of work; without the pool
  // they would all end after one.
  SimulatedPool pool(2, 0, 1);
  EXPECT_GE(CallAtOnce(pool, 6, absl::Milliseconds(30)), absl::Milliseconds(90));
  // The slots come back: the pool is as good afterwards.
  EXPECT_GE(CallAtOnce(pool, 4, absl::Milliseconds(30)), absl::Milliseconds(60));
}

TEST(SimulatedPoolTest, WaitingCallsGetTheirSlotInArrivalOrder) {
  SimulatedPool pool(1, 0, 1);
  absl::Mutex mu;
  std::vector<int> finished;  // guarded by mu
  std::vector<std::thread> threads;
  // Call 0 holds the only slot while 1..5 arrive, one after the other.
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      pool.Call(i == 0 ? absl::Seconds(2) : absl::Milliseconds(1));
      absl::MutexLock lock(&mu);
      finished.push_back(i);
    });
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (pool.Arrived() < i + 1 && absl::Now() < deadline) {
      absl::SleepFor(absl::Microseconds(100));  // polling the pool's queue
    }
  }
  // All five queued behind call 0 at once (else the order says nothing).
  EXPECT_EQ(pool.Waiting(), 5);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(finished, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.Waiting(), 0);
  EXPECT_EQ(pool.Arrived(), 6);
}

TEST(SimulatedPoolTest, CallReturnsHowLongTheSlotWasHeld) {
  SimulatedPool pool(1, 0, 1);
  EXPECT_GE(pool.Call(absl::Milliseconds(5)), absl::Milliseconds(5));
  EXPECT_GE(pool.Call(absl::ZeroDuration()), absl::ZeroDuration());
}

TEST(SimulatedPoolTest, JitterSpreadsTheWorkEvenly) {
  SimulatedPool pool(1, 0.5, 7);
  absl::Duration shortest = absl::InfiniteDuration();
  absl::Duration longest = absl::ZeroDuration();
  absl::Duration total;
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    const absl::Duration held = pool.Call(absl::Milliseconds(2));
    shortest = std::min(shortest, held);
    longest = std::max(longest, held);
    total += held;
  }
  EXPECT_GE(shortest, absl::Milliseconds(1));  // never under work x (1 - jitter)
  EXPECT_LT(shortest, absl::Microseconds(1600));  // and it does vary
  EXPECT_GT(longest, absl::Microseconds(2400));
  EXPECT_GT(total / kCalls, absl::Microseconds(1700));  // centred on the work
}

TEST(SimulatedPoolTest, JitterIsClampedToZeroToOneAndNanIsNone) {
  SimulatedPool wild(1, 1e9, 1);
  SimulatedPool negative(1, -3, 1);
  SimulatedPool nan(1, std::nan(""), 1);
  for (int i = 0; i < 20; ++i) {
    EXPECT_GE(nan.Call(absl::Milliseconds(1)), absl::Milliseconds(1));
    EXPECT_LT(wild.Call(absl::Milliseconds(1)), absl::Seconds(1));  // at most 2 x work (+ noise)
    EXPECT_GE(negative.Call(absl::Milliseconds(1)), absl::Milliseconds(1));
  }
}

TEST(SimulatedPoolTest, CallsWithinThePoolRunTogether) {
  SimulatedPool pool(8, 0, 1);
  EXPECT_LT(CallAtOnce(pool, 8, absl::Milliseconds(200)), absl::Milliseconds(200 * 8));
}

}  // namespace
}  // namespace ferry::examples
