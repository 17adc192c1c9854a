#include "core/engine/delay_stage.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

std::vector<int> PopDue(DelayStage<int>& stage, absl::Time now) {
  std::vector<int> out;
  stage.PopDue(now, [&out](int&& item) { out.push_back(item); });
  return out;
}

TEST(DelayStageTest, HoldsUntilDueAndKeepsOffsetOrderInAFifo) {
  DelayStage<int> stage;
  const DelayStage<int>::Key p0{"t", 0, absl::Seconds(10)};
  stage.Push(p0, kStart + absl::Seconds(10), 0);
  stage.Push(p0, kStart + absl::Seconds(11), 1);
  // Stamped earlier than the one before it: it waits behind it.
  stage.Push(p0, kStart + absl::Seconds(5), 2);
  stage.Push(p0, kStart + absl::Seconds(12), 3);
  EXPECT_EQ(stage.size(), 4);
  EXPECT_THAT(PopDue(stage, kStart + absl::Seconds(9)), IsEmpty());
  EXPECT_THAT(PopDue(stage, kStart + absl::Seconds(11)), ElementsAre(0, 1, 2));
  EXPECT_THAT(PopDue(stage, kStart + absl::Seconds(11)), IsEmpty());
  EXPECT_THAT(PopDue(stage, kStart + absl::Seconds(12)), ElementsAre(3));
  EXPECT_TRUE(stage.empty());
}

TEST(DelayStageTest, MustHoldWhileDueOrWhileItsFifoHoldsEarlierEvents) {
  DelayStage<int> stage;
  const DelayStage<int>::Key key{"t", 0, absl::Seconds(10)};
  EXPECT_FALSE(stage.MustHold(key, kStart, kStart));  // due now, nothing ahead
  EXPECT_TRUE(stage.MustHold(key, kStart + absl::Milliseconds(1), kStart));
  stage.Push(key, kStart + absl::Seconds(10), 0);
  // Already due, but an earlier event of its FIFO still waits: behind it.
  EXPECT_TRUE(stage.MustHold(key, kStart - absl::Seconds(1), kStart));
  // Another partition, or another delay of the same partition, is free.
  EXPECT_FALSE(stage.MustHold({"t", 1, absl::Seconds(10)}, kStart, kStart));
  EXPECT_FALSE(stage.MustHold({"t", 0, absl::Seconds(1)}, kStart, kStart));
}

TEST(DelayStageTest, PartitionsAndDelaysLeaveIndependentlyInDueOrder) {
  DelayStage<int> stage;
  stage.Push({"t", 0, absl::Hours(1)}, kStart + absl::Hours(1), 0);
  stage.Push({"t", 0, absl::Seconds(5)}, kStart + absl::Seconds(5), 1);
  stage.Push({"t", 1, absl::Seconds(3)}, kStart + absl::Seconds(3), 2);
  stage.Push({"u", 0, absl::Seconds(4)}, kStart + absl::Seconds(4), 3);
  EXPECT_EQ(stage.SizeFor("t", 0), 2);
  EXPECT_EQ(stage.SizeFor("t", 1), 1);
  EXPECT_EQ(stage.SizeFor("u", 1), 0);
  // A short delay is not held up by a long one of the same partition.
  EXPECT_THAT(PopDue(stage, kStart + absl::Seconds(5)), ElementsAre(2, 3, 1));
  EXPECT_THAT(PopDue(stage, kStart + absl::Hours(1)), ElementsAre(0));
}

TEST(DelayStageTest, RemovePartitionsDropsTheirEventsOnly) {
  DelayStage<int> stage;
  stage.Push({"t", 0, absl::Seconds(5)}, kStart + absl::Seconds(5), 0);
  stage.Push({"t", 0, absl::Seconds(9)}, kStart + absl::Seconds(9), 1);
  stage.Push({"t", 1, absl::Seconds(5)}, kStart + absl::Seconds(6), 2);
  std::vector<int> removed;
  stage.RemovePartitions([](const std::string& topic, int32_t p) { return topic == "t" && p == 0; },
                         [&removed](int&& item) { removed.push_back(item); });
  EXPECT_THAT(removed, ElementsAre(0, 1));
  EXPECT_EQ(stage.size(), 1);
  EXPECT_THAT(PopDue(stage, kStart + absl::Hours(1)), ElementsAre(2));
}

}  // namespace
}  // namespace ferry
