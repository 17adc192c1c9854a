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
  // Takes and finishes each lane head in turn.
  std::vector<int64_t> TakeAllReleasing() {
    std::vector<int64_t> offsets;
    while (std::optional<QueuedEvent> taken = queues_.Take(0, 0)) {
      offsets.push_back(taken->event->offset());
      queues_.ReleaseLane(*taken);
    }
    return offsets;
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

TEST_F(WorkQueuesTest, RunMembersFollowTheHeadAndEachHoldsTheLane) {
  for (int64_t offset = 0; offset < 3; ++offset) queues_.Enqueue(Keyed(offset, "a"), false);
  std::optional<QueuedEvent> head = queues_.Take(0, 0);
  ASSERT_TRUE(head.has_value());
  const QueuedEvent* follower = queues_.PeekRunMember(*head);
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(follower->event->offset(), 1);
  QueuedEvent second = queues_.TakeRunMember(head->lane);
  EXPECT_EQ(second.event->offset(), 1);
  // Two members in flight: the lane is free only once both left.
  queues_.ReleaseLane(*head);
  EXPECT_FALSE(queues_.HasWork(0, 0));
  queues_.ReleaseLane(second);
  EXPECT_THAT(TakeAll(), ElementsAre(2));
}

TEST_F(WorkQueuesTest, NoRunMemberAfterALostStreamOrFromAnotherLane) {
  QueuedEvent head = Keyed(0, "a");
  EXPECT_EQ(queues_.PeekRunMember(head), nullptr);  // its lane is empty
  QueuedEvent suspect = Keyed(1, "a");
  suspect.strikes = 1;
  queues_.Enqueue(std::move(suspect), false);
  EXPECT_EQ(queues_.PeekRunMember(head), nullptr);  // it travels alone
  QueuedEvent unordered = Keyed(2, "a");
  unordered.lane = -1;
  EXPECT_EQ(queues_.PeekRunMember(unordered), nullptr);
}

TEST_F(WorkQueuesTest, AMemberGivenBackLinesUpAfterItsRunsEarlierMembers) {
  queues_.Enqueue(Keyed(9, "a"), false);
  auto member = [this](int64_t offset, uint64_t run_id, int position) {
    QueuedEvent queued = Keyed(offset, "a");
    queued.run_id = run_id;
    queued.run_position = position;
    return queued;
  };
  queues_.Enqueue(member(4, 1, 4), true);
  queues_.Enqueue(member(2, 1, 2), true);
  queues_.Enqueue(member(3, 1, 3), true);
  queues_.Enqueue(member(1, 0, 0), true);  // not a member: the very front
  EXPECT_THAT(TakeAllReleasing(), ElementsAre(1, 2, 3, 4, 9));
}

}  // namespace
}  // namespace ferry
