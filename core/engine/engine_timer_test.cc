#include "core/engine/engine_timer.h"

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry {
namespace {

using ::ferry::testing::Connect;
using ::ferry::testing::EngineTestConfig;
using ::ferry::testing::FakeClock;
using ::ferry::testing::FakeWorkerStream;
using ::ferry::testing::MakeEvent;
using ::testing::ElementsAre;

constexpr absl::Duration kPatience = absl::Seconds(30);

// Counts ticks; lets a test wait for a number of them.
class TickCounter {
 public:
  void Tick() {
    absl::MutexLock lock(&mu_);
    ++ticks_;
  }
  // True when `n` ticks happened before the deadline.
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ticks_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }
  int ticks() {
    absl::MutexLock lock(&mu_);
    return ticks_;
  }

 private:
  absl::Mutex mu_;
  int ticks_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(EngineTimerTest, TicksUntilStopped) {
  TickCounter counter;
  EngineTimer timer([&counter] { counter.Tick(); }, absl::Milliseconds(1));
  timer.Start();
  ASSERT_TRUE(counter.WaitFor(3));
  timer.Stop();
  timer.Stop();  // idempotent
  EXPECT_GE(counter.ticks(), 3);
}

TEST(EngineTimerTest, StopDoesNotWaitOutTheTick) {
  TickCounter counter;
  EngineTimer timer([&counter] { counter.Tick(); }, absl::Hours(1));
  timer.Start();
  const absl::Time before = absl::Now();
  timer.Stop();
  EXPECT_LT(absl::Now() - before, absl::Seconds(10));
  EXPECT_EQ(counter.ticks(), 0);
}

TEST(EngineTimerTest, StopWithoutStartAndDestructionAreSafe) {
  TickCounter counter;
  {
    EngineTimer never_started([&counter] { counter.Tick(); }, absl::Milliseconds(1));
    never_started.Stop();
  }
  {
    EngineTimer running([&counter] { counter.Tick(); }, absl::Milliseconds(1));
    running.Start();
    ASSERT_TRUE(counter.WaitFor(1));
  }  // the destructor stops and joins before `counter` goes
}

// The timer is what expires deadlines in the server: nothing else calls
// Engine::OnTimer.
TEST(EngineTimerTest, DrivesTheEnginesDeadlines) {
  FakeClock clock;
  Engine engine(EngineTestConfig(), &clock);
  engine.OnAssigned({{"t", 0}});
  FakeWorkerStream stream("s");
  Connect(engine, stream, 100);
  engine.Submit(MakeEvent(0, 0, "a"), 10);
  const uint64_t event_id = stream.TakeHeld()[0].id();

  EngineTimer timer(&engine, absl::Milliseconds(1));
  timer.Start();
  clock.Advance(absl::Seconds(11));  // past the 10s deadline
  const absl::Time deadline = absl::Now() + kPatience;
  while (engine.Snapshot().counters.timed_out == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));  // polling a condition with a deadline
  }
  timer.Stop();  // joins: the stream is ours again
  EXPECT_EQ(engine.Snapshot().counters.timed_out, 1);
  EXPECT_THAT(stream.cancelled(), ElementsAre(event_id));
}

}  // namespace
}  // namespace ferry
