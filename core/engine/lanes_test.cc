#include "core/engine/lanes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

using IntLanes = Lanes<int>;

TEST(LanesTest, SameKeySameLaneAcrossPartitionsAndCalls) {
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const int lane = IntLanes::LaneFor(Ordering::kKey, "orders", 3, key, 64);
    EXPECT_EQ(lane, IntLanes::LaneFor(Ordering::kKey, "orders", 3, key, 64));
    EXPECT_EQ(lane, IntLanes::LaneFor(Ordering::kKey, "orders", 7, key, 64));
    EXPECT_GE(lane, 0);
    EXPECT_LT(lane, 64);
  }
}

TEST(LanesTest, HashIsStableAcrossRuns) {
  // FNV-1a reference values: a change here moves keys between lanes.
  EXPECT_EQ(StableHash(""), 14695981039346656037ULL);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cULL);
}

TEST(LanesTest, KeysSpreadOverLanes) {
  std::vector<int> per_lane(16, 0);
  for (int i = 0; i < 1600; ++i) {
    ++per_lane[IntLanes::LaneFor(Ordering::kKey, "t", 0, "key-" + std::to_string(i), 16)];
  }
  for (int count : per_lane) {
    EXPECT_GT(count, 50);
    EXPECT_LT(count, 150);
  }
}

TEST(LanesTest, EmptyKeyAndPartitionOrderingUseThePartition) {
  const int by_partition = IntLanes::LaneFor(Ordering::kPartition, "t", 5, "k1", 64);
  EXPECT_EQ(by_partition, IntLanes::LaneFor(Ordering::kPartition, "t", 5, "k2", 64));
  EXPECT_EQ(by_partition, IntLanes::LaneFor(Ordering::kKey, "t", 5, "", 64));
}

TEST(LanesTest, FifoWithinALane) {
  IntLanes lanes(4, 100);
  for (int i = 0; i < 10; ++i) lanes.PushBack(2, i);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(lanes.PopFront(2), i);
  EXPECT_TRUE(lanes.empty(2));
}

TEST(LanesTest, PushFrontPutsARetryFirst) {
  IntLanes lanes(1, 100);
  lanes.PushBack(0, 2);
  lanes.PushBack(0, 3);
  lanes.PushFront(0, 1);
  EXPECT_EQ(lanes.PopFront(0), 1);
  EXPECT_EQ(lanes.PopFront(0), 2);
}

TEST(LanesTest, AnyFullFollowsEveryWayALaneGrowsAndShrinks) {
  IntLanes lanes(3, 2);
  EXPECT_FALSE(lanes.any_full());
  lanes.PushBack(1, 1);
  lanes.PushFront(1, 0);
  EXPECT_TRUE(lanes.any_full());
  lanes.PushBack(1, 2);  // over capacity: still accepted
  lanes.PushBack(2, 5);
  lanes.PushBack(2, 6);
  lanes.PopFront(1);
  EXPECT_TRUE(lanes.any_full());  // lane 1 at capacity, lane 2 full
  lanes.PopFront(1);
  lanes.RemoveIf(2, [](int item) { return item == 5; });
  EXPECT_FALSE(lanes.any_full());
  lanes.PushBack(2, 7);
  EXPECT_TRUE(lanes.any_full());
  lanes.RemoveIf(2, [](int) { return false; });
  EXPECT_TRUE(lanes.any_full());
}

TEST(LanesTest, AllDrainedCountsLanesAboveTheLowMark) {
  IntLanes lanes(3, /*capacity_per_lane=*/4, /*low_mark=*/1);
  EXPECT_TRUE(lanes.all_drained());
  lanes.PushBack(0, 1);
  EXPECT_TRUE(lanes.all_drained());  // at the mark, not above
  lanes.PushFront(0, 0);
  EXPECT_FALSE(lanes.all_drained());
  lanes.PushBack(2, 5);
  lanes.PushBack(2, 6);
  lanes.PopFront(0);
  EXPECT_FALSE(lanes.all_drained());  // lane 2 still above
  lanes.RemoveIf(2, [](int item) { return item == 6; });
  EXPECT_TRUE(lanes.all_drained());
  EXPECT_EQ(lanes.size(1), 0u);  // never used: no queue made, still answers
  EXPECT_TRUE(lanes.RemoveIf(1, [](int) { return true; }).empty());
}

TEST(LanesTest, FullAndBusy) {
  IntLanes lanes(2, 2);
  lanes.PushBack(0, 1);
  EXPECT_FALSE(lanes.full(0));
  lanes.PushBack(0, 2);
  EXPECT_TRUE(lanes.full(0));
  EXPECT_FALSE(lanes.full(1));
  EXPECT_FALSE(lanes.busy(0));
  lanes.AddInFlight(0);
  EXPECT_TRUE(lanes.busy(0));
  lanes.RemoveInFlight(0);
  EXPECT_FALSE(lanes.busy(0));
}

TEST(LanesTest, RemoveIfKeepsOrderOfTheRest) {
  IntLanes lanes(1, 100);
  for (int i = 0; i < 6; ++i) lanes.PushBack(0, i);
  const std::vector<int> removed = lanes.RemoveIf(0, [](int v) { return v % 2 == 0; });
  EXPECT_EQ(removed, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(lanes.PopFront(0), 1);
  EXPECT_EQ(lanes.PopFront(0), 3);
  EXPECT_EQ(lanes.PopFront(0), 5);
}

TEST(LanesTest, InsertNearFrontGoesAfterTheItemsThatStayAhead) {
  IntLanes lanes(1, 10);
  lanes.PushBack(0, 10);
  lanes.PushFront(0, 2);
  lanes.PushFront(0, 1);
  lanes.InsertNearFront(0, 3, [](int item) { return item < 3; });
  lanes.InsertNearFront(0, 0, [](int item) { return item < 0; });
  lanes.InsertNearFront(0, 11, [](int item) { return item < 11; });
  std::vector<int> order;
  while (!lanes.empty(0)) order.push_back(lanes.PopFront(0));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 10, 11}));
}

}  // namespace
}  // namespace ferry
