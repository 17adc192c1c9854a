#include "core/engine/concurrency_limiter.h"

#include <cstdint>
#include <algorithm>
#include <limits>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

ConcurrencyConfig Adaptive(int initial_limit, int min_limit = 1) {
  ConcurrencyConfig config;
  config.mode = ConcurrencyMode::kAdaptive;
  config.initial_limit = initial_limit;
  config.min_limit = min_limit;
  return config;
}

// A downstream with a fixed pool of `pool` workers and a service time of
// `service`: up to `pool` events in flight are served at once; beyond it
// they queue, and latency grows in proportion.
absl::Duration PoolLatency(int64_t in_flight, int64_t pool,
                           absl::Duration service) {
  if (in_flight <= pool) return service;
  return service * (static_cast<double>(in_flight) / static_cast<double>(pool));
}

constexpr int64_t kPool = 16;
const absl::Duration kService = absl::Milliseconds(10);

// Drives `limiter` in a closed loop against PoolLatency: the processor
// always has `limit()` events in flight. Returns the last latency.
struct LoopStats {
  int64_t min_limit = std::numeric_limits<int64_t>::max();
  int64_t max_limit = 0;
  int64_t samples_in_band = 0;  // limit within [pool, 2 x pool]
  absl::Duration max_latency = absl::ZeroDuration();
};
LoopStats RunClosedLoop(ConcurrencyLimiter& limiter, int samples,
                        absl::Duration service) {
  LoopStats stats;
  for (int i = 0; i < samples; ++i) {
    const int64_t in_flight = limiter.limit();
    const absl::Duration latency = PoolLatency(in_flight, kPool, service);
    limiter.OnSample(latency, in_flight, /*dropped=*/false);
    const int64_t limit = limiter.limit();
    stats.min_limit = std::min(stats.min_limit, limit);
    stats.max_limit = std::max(stats.max_limit, limit);
    if (limit >= kPool && limit <= 2 * kPool) ++stats.samples_in_band;
    stats.max_latency = std::max(stats.max_latency, latency);
  }
  return stats;
}

TEST(ConcurrencyLimiterTest, FixedModeNeverChanges) {
  ConcurrencyConfig config;  // fixed by default
  ConcurrencyLimiter limiter(config, 64);
  EXPECT_FALSE(limiter.adaptive());
  EXPECT_EQ(limiter.limit(), 64);
  for (int i = 0; i < 1000; ++i) {
    limiter.OnSample(absl::Milliseconds(1 + i), i % 64, /*dropped=*/i % 3 == 0);
  }
  EXPECT_EQ(limiter.limit(), 64);
  EXPECT_EQ(limiter.changes(), 0);
}

TEST(ConcurrencyLimiterTest, ConstructorClampsTheConfig) {
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(20), 8).limit(), 8);
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(0), 8).limit(), 1);
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(-5, -5), 8).limit(), 1);
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(2, 5), 8).limit(), 5);  // initial >= min
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(2, 50), 8).limit(), 8);  // min <= max
  EXPECT_EQ(ConcurrencyLimiter(Adaptive(20), 0).limit(), 1);    // max >= 1
  EXPECT_EQ(ConcurrencyLimiter(ConcurrencyConfig{}, -3).limit(), 1);
}

TEST(ConcurrencyLimiterTest, SettlesJustAboveAFixedPool) {
  for (int initial : {1, 20}) {
    ConcurrencyLimiter limiter(Adaptive(initial), 1000);
    RunClosedLoop(limiter, 50, kService);  // warm-up
    const LoopStats stats = RunClosedLoop(limiter, 500, kService);
    EXPECT_GE(stats.min_limit, kPool) << "initial " << initial;
    EXPECT_LE(stats.max_limit, 2 * kPool) << "initial " << initial;
    EXPECT_LE(stats.max_latency, 2 * kService) << "initial " << initial;
    EXPECT_GT(limiter.changes(), 0);
  }
}

TEST(ConcurrencyLimiterTest, ProbesDoNotRatchetTheLimitUp) {
  // 20,000 samples are dozens of probes. A probe that re-learnt the no-load
  // latency under full load would take the loaded latency for the unloaded
  // one and add beta each time; this one halves the limit first.
  ConcurrencyLimiter limiter(Adaptive(20), 1000);
  RunClosedLoop(limiter, 50, kService);
  const LoopStats stats = RunClosedLoop(limiter, 20'000, kService);
  EXPECT_LE(stats.max_limit, 2 * kPool);
  EXPECT_LE(stats.max_latency, 2 * kService);
  // Probing dips below the pool now and then, briefly.
  EXPECT_GE(stats.min_limit, kPool / 2 - 1);
  EXPECT_GT(stats.samples_in_band, 20'000 * 95 / 100);
}

TEST(ConcurrencyLimiterTest, ComesDownFromAnOverloadedStart) {
  // Started far above the pool, the first sample already carries a queue,
  // and only the probes find the real no-load latency.
  ConcurrencyLimiter limiter(Adaptive(100), 1000);
  RunClosedLoop(limiter, 20'000, kService);
  const LoopStats stats = RunClosedLoop(limiter, 2'000, kService);
  EXPECT_LE(stats.max_limit, 2 * kPool);
  // In the band but for the dips of probes.
  EXPECT_GE(stats.min_limit, kPool / 2 - 1);
  EXPECT_GT(stats.samples_in_band, 2'000 * 9 / 10);
}

TEST(ConcurrencyLimiterTest, ProbeRelearnsASlowerNoLoadLatency) {
  ConcurrencyLimiter limiter(Adaptive(20), 1000);
  RunClosedLoop(limiter, 500, kService);
  // The downstream gets three times slower for good. Against the old
  // no-load latency every sample looks queued, and the limit falls below
  // the pool...
  const absl::Duration slower = 3 * kService;
  const LoopStats before_probe = RunClosedLoop(limiter, 300, slower);
  EXPECT_LT(before_probe.min_limit, kPool);
  // ... until a probe learns the new no-load latency.
  RunClosedLoop(limiter, 2'000, slower);
  const LoopStats after = RunClosedLoop(limiter, 1'000, slower);
  // In the band but for the dips of later probes.
  EXPECT_GT(after.samples_in_band, 1'000 * 95 / 100);
  EXPECT_LE(after.max_limit, 2 * kPool);
  EXPECT_LE(after.max_latency, 2 * slower);
}

TEST(ConcurrencyLimiterTest, DropsCutTheLimitMultiplicatively) {
  ConcurrencyLimiter limiter(Adaptive(100), 1000);
  const int64_t changes = limiter.changes();
  limiter.OnSample(absl::Milliseconds(5), 100, /*dropped=*/true);
  EXPECT_EQ(limiter.limit(), 90);
  // One cut per window (a limit's worth of samples): the drops of one round
  // trip are one signal.
  for (int i = 0; i < 89; ++i) limiter.OnSample(absl::Milliseconds(5), 90, /*dropped=*/true);
  EXPECT_EQ(limiter.limit(), 90);
  limiter.OnSample(absl::Milliseconds(5), 90, /*dropped=*/true);
  EXPECT_EQ(limiter.limit(), 81);
  EXPECT_EQ(limiter.changes(), changes + 2);
}

TEST(ConcurrencyLimiterTest, DropsNeverGoBelowMin) {
  ConcurrencyLimiter limiter(Adaptive(50, 7), 1000);
  for (int i = 0; i < 2000; ++i) {
    limiter.OnSample(absl::Milliseconds(5), 50, /*dropped=*/true);
    ASSERT_GE(limiter.limit(), 7);
  }
  EXPECT_EQ(limiter.limit(), 7);
}

TEST(ConcurrencyLimiterTest, DropsCutASettledLimit) {
  ConcurrencyLimiter limiter(Adaptive(20), 1000);
  RunClosedLoop(limiter, 100, kService);
  const int64_t settled = limiter.limit();
  // Five windows of drops: five cuts.
  for (int64_t i = 0; i < 5 * settled; ++i) {
    limiter.OnSample(kService, limiter.limit(), /*dropped=*/true);
  }
  EXPECT_LT(limiter.limit(), settled * 6 / 10 + 1);
}

TEST(ConcurrencyLimiterTest, NeverAboveMax) {
  // A downstream that never slows down: the limit grows to the bound, and
  // stays there.
  ConcurrencyLimiter limiter(Adaptive(1), 12);
  for (int i = 0; i < 5000; ++i) {
    const int64_t in_flight = limiter.limit();
    limiter.OnSample(kService, in_flight, /*dropped=*/false);
    ASSERT_LE(limiter.limit(), 12);
    ASSERT_GE(limiter.limit(), 1);
  }
  EXPECT_EQ(limiter.limit(), 12);
}

TEST(ConcurrencyLimiterTest, SmallLimitsMove) {
  // log10(1) is 0: without its floor of 1 the steps would be nothing.
  ConcurrencyLimiter limiter(Adaptive(1), 1000);
  limiter.OnSample(kService, 1, false);  // learns the no-load latency
  limiter.OnSample(kService, 1, false);
  EXPECT_EQ(limiter.limit(), 7);  // 1 + 6 x max(1, log10 1)
}

TEST(ConcurrencyLimiterTest, AppLimitedDoesNotGrow) {
  ConcurrencyLimiter limiter(Adaptive(20), 1000);
  // Flat latency, but only 9 of 20 in flight: the limit is not in use.
  for (int i = 0; i < 90; ++i) limiter.OnSample(kService, 9, false);
  EXPECT_EQ(limiter.limit(), 20);
  EXPECT_EQ(limiter.changes(), 0);
  // Half of it in use is enough (over a window of 20 samples).
  for (int i = 0; i < 20; ++i) limiter.OnSample(kService, 10, false);
  EXPECT_GT(limiter.limit(), 20);
}

TEST(ConcurrencyLimiterTest, LongQueueShrinks) {
  ConcurrencyLimiter limiter(Adaptive(40), 1000);
  limiter.OnSample(kService, 40, false);
  // Latency doubled: an estimated queue of 20 > beta (6 x log10 40 = 9.6),
  // acted on once the window of 40 samples is full.
  for (int i = 0; i < 39; ++i) limiter.OnSample(2 * kService, 40, false);
  EXPECT_EQ(limiter.limit(), 40);
  limiter.OnSample(2 * kService, 40, false);
  EXPECT_EQ(limiter.limit(), 38);  // 40 - log10(40)
}

TEST(ConcurrencyLimiterTest, GarbageSamplesChangeNothing) {
  ConcurrencyLimiter limiter(Adaptive(20), 1000);
  limiter.OnSample(kService, 20, false);
  for (absl::Duration latency :
       {absl::ZeroDuration(), -kService, absl::InfiniteDuration(),
        -absl::InfiniteDuration()}) {
    for (int i = 0; i < 200; ++i) limiter.OnSample(latency, 20, false);
  }
  EXPECT_EQ(limiter.limit(), 20);
  EXPECT_EQ(limiter.changes(), 0);
  // A negative in-flight count is taken as none (app-limited).
  limiter.OnSample(kService, -5, false);
  limiter.OnSample(kService, std::numeric_limits<int64_t>::min(), false);
  EXPECT_EQ(limiter.limit(), 20);
  // A huge one is no crash; the limit stays in bounds.
  for (int i = 0; i < 100; ++i) {
    limiter.OnSample(kService, std::numeric_limits<int64_t>::max() / 4, false);
  }
  EXPECT_LE(limiter.limit(), 1000);
}

// Feeds flat-latency samples at a full limit of 20 (also the bound, so it
// cannot grow) until a probe halves it; returns the samples it took.
int RunUntilProbe(ConcurrencyLimiter& limiter) {
  for (int i = 1; i <= 1000; ++i) {
    limiter.OnSample(kService, 20, false);
    if (limiter.limit() != 20) return i;
  }
  return -1;
}

TEST(ConcurrencyLimiterTest, ProbeHalvesTheLimitAndWaitsForTheDrain) {
  ConcurrencyLimiter limiter(Adaptive(20), 20);
  const int samples = RunUntilProbe(limiter);
  EXPECT_EQ(samples, 600);  // 30 x limit
  EXPECT_EQ(limiter.limit(), 10);
  // Results of events sent under the old limit: no change while they come.
  for (int i = 0; i < 10; ++i) limiter.OnSample(5 * kService, 20, false);
  EXPECT_EQ(limiter.limit(), 10);
  // Drained: the next 10 samples (the halved limit's worth) are learnt
  // from, then the limit grows back from the no-load latency they showed.
  limiter.OnSample(kService, 10, false);
  for (int i = 0; i < 10; ++i) limiter.OnSample(kService, 10, false);
  EXPECT_EQ(limiter.limit(), 10);
  // A window (10 samples) later it grows.
  for (int i = 0; i < 9; ++i) limiter.OnSample(kService, 10, false);
  EXPECT_EQ(limiter.limit(), 10);
  limiter.OnSample(kService, 10, false);
  EXPECT_EQ(limiter.limit(), 16);  // 10 + 6 x log10(10)
}

TEST(ConcurrencyLimiterTest, ProbeStopsWaitingForADrainThatNeverComes) {
  ConcurrencyLimiter limiter(Adaptive(20), 20);
  ASSERT_GT(RunUntilProbe(limiter), 0);
  ASSERT_EQ(limiter.limit(), 10);
  // In flight stays above the halved limit: after one old limit's worth
  // of samples (20), the learning (10) and a window (10) the limit moves
  // again.
  int samples = 0;
  while (limiter.limit() == 10 && samples < 100) {
    limiter.OnSample(kService, 20, false);
    ++samples;
  }
  EXPECT_EQ(samples, 40);
  EXPECT_EQ(limiter.limit(), 16);
}

TEST(ConcurrencyLimiterTest, ProbeNeverGoesBelowMin) {
  ConcurrencyConfig config = Adaptive(20, 15);
  ConcurrencyLimiter limiter(config, 20);
  ASSERT_GT(RunUntilProbe(limiter), 0);
  EXPECT_EQ(limiter.limit(), 15);
}

}  // namespace
}  // namespace ferry
