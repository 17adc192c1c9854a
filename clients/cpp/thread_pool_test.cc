#include "clients/cpp/thread_pool.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ferry::sdk::internal {
namespace {

TEST(ThreadPoolTest, RunsTasksConcurrentlyOnItsThreads) {
  absl::Mutex mu;
  int started = 0;
  absl::Notification release;
  // Declared after what its tasks use, so it is destroyed (and its threads
  // joined) first: a task can still be inside WaitForNotification after
  // Notify, and `release` must outlive it (TSan saw the race).
  ThreadPool pool(2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.Schedule([&] {
      {
        absl::MutexLock l(&mu);
        ++started;
      }
      release.WaitForNotification();
    }));
  }
  // Both tasks run at once: two threads, neither waits for the other.
  {
    absl::MutexLock l(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* n) { return *n == 2; }, &started),
                                    absl::Seconds(30)));
  }
  release.Notify();
}

TEST(ThreadPoolTest, StopRunsWhatIsQueuedThenRefusesNewTasks) {
  std::atomic<int> ran{0};
  ThreadPool pool(1);
  absl::Notification blocked;
  ASSERT_TRUE(pool.Schedule([&] { blocked.WaitForNotification(); }));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Schedule([&] { ran.fetch_add(1); }));
  std::thread stopper([&] { pool.Stop(); });
  blocked.Notify();
  stopper.join();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_FALSE(pool.Schedule([&] { ran.fetch_add(1); }));
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace ferry::sdk::internal
