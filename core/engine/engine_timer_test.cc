#include "core/engine/engine_timer.h"

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
  timer.Stop();  // idempotent
  EXPECT_EQ(engine.Snapshot().counters.timed_out, 1);
  EXPECT_THAT(stream.cancelled(), ElementsAre(event_id));
}

}  // namespace
}  // namespace ferry
