// The pure rules of runs (core/engine/runs.h).
#include "core/engine/runs.h"

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(RunLengthTest, TheSmallestBoundWinsAndNeverBelowOne) {
  EXPECT_EQ(RunLength(8, 100, 100, 64), 8);
  EXPECT_EQ(RunLength(8, 3, 100, 64), 3);    // credit
  EXPECT_EQ(RunLength(8, 100, 2, 64), 2);    // room under ferry's cap
  EXPECT_EQ(RunLength(100, 100, 100, 5), 5); // batch size
  EXPECT_EQ(RunLength(0, 100, 100, 64), 1);  // no runs
  EXPECT_EQ(RunLength(1, 100, 100, 64), 1);
  EXPECT_EQ(RunLength(8, 0, 100, 64), 1);
}

TEST(MemberTimeoutTest, KthMemberGetsKTimeouts) {
  EXPECT_EQ(MemberTimeout(absl::Seconds(10), 0), absl::Seconds(10));  // alone
  EXPECT_EQ(MemberTimeout(absl::Seconds(10), 1), absl::Seconds(10));
  EXPECT_EQ(MemberTimeout(absl::Seconds(10), 3), absl::Seconds(30));
}

TEST(TreatAsNotAttemptedTest, OnlyForAMemberAfterTheFirst) {
  QueuedEvent queued;
  EXPECT_FALSE(TreatAsNotAttempted(queued));  // not in a run
  queued.run_id = 7;
  queued.run_position = 1;
  EXPECT_FALSE(TreatAsNotAttempted(queued));  // the first member
  queued.run_position = 2;
  EXPECT_TRUE(TreatAsNotAttempted(queued));
}

TEST(LinesUpBeforeTest, OnlyEarlierMembersOfTheSameRunStayAhead) {
  QueuedEvent waiting;
  waiting.run_id = 7;
  waiting.run_position = 2;
  EXPECT_TRUE(LinesUpBefore(waiting, 7, 3));
  EXPECT_FALSE(LinesUpBefore(waiting, 7, 2));
  EXPECT_FALSE(LinesUpBefore(waiting, 7, 1));
  EXPECT_FALSE(LinesUpBefore(waiting, 8, 3));  // another run
  EXPECT_FALSE(LinesUpBefore(waiting, 0, 3));  // not a run member
  waiting.run_id = 0;
  EXPECT_FALSE(LinesUpBefore(waiting, 0, 0));
}

TEST(RunIdsTest, NonZeroAndNeverReused) {
  RunIds ids;
  const uint64_t first = ids.Next();
  EXPECT_NE(first, 0u);
  EXPECT_NE(ids.Next(), first);
}

}  // namespace
}  // namespace ferry
