#include "core/engine/work_queues.h"

#include <optional>
#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::EngineTestConfig;
using ::ferry::testing::Queued;
using ::testing::ElementsAre;

const TopicPartition kP0{"t", 0};

class WorkQueuesTest : public ::testing::Test {
 protected:
  QueuedEvent Keyed(int64_t offset, const std::string& key) {
    QueuedEvent queued = Queued(kP0, offset, 1, 0, key);
    queued.lane = queues_.LaneFor(Ordering::kKey, 0, *queued.event);
    return queued;
  }
  std::vector<int64_t> TakeAll() {
    std::vector<int64_t> offsets;
    while (std::optional<QueuedEvent> taken = queues_.Take(0, 0)) {
      offsets.push_back(taken->event->offset());
    }
    return offsets;
  }

  Config config_ = EngineTestConfig();
  SchedulingPlan plan_{config_};
  WorkQueues queues_{config_, plan_};
};

TEST_F(WorkQueuesTest, ALaneReleasesItsNextEventOnlyAfterTheLastOneFinished) {
  queues_.Enqueue(Keyed(1, "a"), false);
  queues_.Enqueue(Keyed(2, "a"), false);
  EXPECT_TRUE(queues_.HasWork(0, 0));
  std::optional<QueuedEvent> first = queues_.Take(0, 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->event->offset(), 1);
  EXPECT_FALSE(queues_.Take(0, 0).has_value());  // offset 2 waits for 1
  queues_.ReleaseLane(*first);
  EXPECT_THAT(TakeAll(), ElementsAre(2));
}

TEST_F(WorkQueuesTest, UnorderedEventsLeaveInFifoOrderWithoutALane) {
  queues_.Enqueue(Queued(kP0, 1), false);
  queues_.Enqueue(Queued(kP0, 2), false);
  queues_.Enqueue(Queued(kP0, 0), /*front=*/true);
  EXPECT_EQ(queues_.LaneFor(Ordering::kUnordered, 0, *Queued(kP0, 0).event), -1);
  EXPECT_THAT(TakeAll(), ElementsAre(0, 1, 2));
  EXPECT_FALSE(queues_.HasWork(0, 0));
}

TEST_F(WorkQueuesTest, RemovedEventsKeepTheirOrderAndTheRestStays) {
  for (int64_t offset = 0; offset < 6; ++offset) queues_.Enqueue(Keyed(offset, "a"), false);
  std::vector<int64_t> removed;
  queues_.RemoveQueuedIf([](const QueuedEvent& q) { return q.event->offset() % 2 == 0; },
                         [&removed](QueuedEvent q) { removed.push_back(q.event->offset()); });
  EXPECT_THAT(removed, ElementsAre(0, 2, 4));
  queues_.MarkAllLanesReady();
  std::optional<QueuedEvent> taken = queues_.Take(0, 0);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->event->offset(), 1);
}

TEST_F(WorkQueuesTest, QuarantineIsCountedAndTakenByMatch) {
  QueuedEvent a = Queued(kP0, 1);
  QueuedEvent b = Queued(kP0, 2);
  queues_.Quarantine(std::move(a));
  queues_.Quarantine(std::move(b));
  EXPECT_EQ(queues_.quarantine(0).size(), 2u);
  std::vector<QueuedEvent> taken =
      queues_.TakeQuarantinedIf([](const QueuedEvent& q) { return q.event->offset() == 2; });
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(queues_.quarantine(0).size(), 1u);
  EngineSnapshot snapshot;
  queues_.AddToSnapshot(&snapshot);
  EXPECT_EQ(snapshot.queued_events, 1);
}

TEST_F(WorkQueuesTest, ALaneHeadOfAnotherProcessorIsLeftForIt) {
  config_.processors.push_back(config_.processors[0]);
  config_.processors[1].name = "q";
  SchedulingPlan plan(config_);
  WorkQueues queues(config_, plan);
  QueuedEvent other = Keyed(1, "a");
  other.processor = 1;
  queues.Enqueue(std::move(other), false);
  EXPECT_FALSE(queues.HasWork(0, 0));
  EXPECT_FALSE(queues.Take(0, 0).has_value());
  ASSERT_TRUE(queues.HasWork(1, 0));
  EXPECT_TRUE(queues.Take(1, 0).has_value());
}

TEST_F(WorkQueuesTest, SnapshotCountsTheLongestLaneAndBusyLanes) {
  queues_.Enqueue(Keyed(1, "a"), false);
  queues_.Enqueue(Keyed(2, "a"), false);
  queues_.Enqueue(Keyed(3, "a"), false);
  ASSERT_TRUE(queues_.Take(0, 0).has_value());
  EngineSnapshot snapshot;
  queues_.AddToSnapshot(&snapshot);
  EXPECT_EQ(snapshot.queued_events, 2);
  EXPECT_EQ(snapshot.longest_lane, 2);
  EXPECT_EQ(snapshot.lanes_in_use, 1);
}

}  // namespace
}  // namespace ferry
