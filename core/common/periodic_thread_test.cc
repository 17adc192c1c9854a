#include "core/common/periodic_thread.h"

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// Counts runs; lets a test wait for a number of them.
class Counter {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++runs_;
  }
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }
  int runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PeriodicThreadTest, RunsEveryIntervalUntilStopped) {
  Counter counter;
  PeriodicThread thread([&counter] { counter.Add(); }, absl::Milliseconds(1));
  thread.Start();
  ASSERT_TRUE(counter.WaitFor(3));
  EXPECT_TRUE(thread.Stop());
  const int at_stop = counter.runs();
  EXPECT_FALSE(thread.Stop());  // idempotent
  thread.Start();               // stays stopped: no thread, so no run
  EXPECT_FALSE(thread.Stop());
  EXPECT_EQ(counter.runs(), at_stop);
}

TEST(PeriodicThreadTest, StopDoesNotWaitOutTheInterval) {
  Counter counter;
  PeriodicThread thread([&counter] { counter.Add(); }, absl::Hours(1));
  thread.Start();
  const absl::Time before = absl::Now();
  EXPECT_TRUE(thread.Stop());
  EXPECT_LT(absl::Now() - before, absl::Seconds(10));
  EXPECT_EQ(counter.runs(), 0);
}

TEST(PeriodicThreadTest, NeverStartedStopsAsNotRunning) {
  Counter counter;
  PeriodicThread thread([&counter] { counter.Add(); }, absl::Milliseconds(1));
  EXPECT_FALSE(thread.Stop());
  EXPECT_EQ(counter.runs(), 0);
}

}  // namespace
}  // namespace ferry
