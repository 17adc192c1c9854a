// FlowControl with a fake fetcher, budgets and clock: when it holds records
// back, what it pauses and resumes as the budgets fill and drain, partitions
// are held and released, and partitions come and go.
#include "core/kafka/flow_control.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/fake_clock.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};
const TopicPartition kT2{"t", 2};
const std::vector<TopicPartition> kAssignment = {kT0, kT1, kT2};

// Records every call, and the partitions currently paused.
class FakeFetch final : public FetchSwitch {
 public:
  absl::Status Pause(const std::vector<TopicPartition>& partitions) override {
    for (const TopicPartition& tp : partitions) {
      paused.insert(tp);
      calls.push_back("pause " + tp.ToString());
    }
    return fail ? absl::UnavailableError("pause: broker gone") : absl::OkStatus();
  }
  absl::Status Resume(const std::vector<TopicPartition>& partitions) override {
    for (const TopicPartition& tp : partitions) {
      paused.erase(tp);
      calls.push_back("resume " + tp.ToString());
    }
    return fail ? absl::UnavailableError("resume: broker gone") : absl::OkStatus();
  }
  std::set<TopicPartition> paused;
  std::vector<std::string> calls;
  bool fail = false;
};

class FlowControlTest : public ::testing::Test {
 protected:
  testing::FakeClock clock_;
  FlowControl flow_{FlowControl::Budgets{[this] {
                                           ++high_reads_;
                                           return over_high_;
                                         },
                                         [this] {
                                           ++low_reads_;
                                           return under_low_;
                                         }},
                    /*stats=*/nullptr, &clock_};
  // Full buffers long enough that the loop must poll again: everything is
  // paused through the fetcher.
  void HoldUntilPaused() {
    over_high_ = true;
    under_low_ = false;
    flow_.UpdateBudgets(fetch_, kAssignment, false);
    clock_.Advance(FlowControl::kHoldBeforePause);
    flow_.UpdateBudgets(fetch_, kAssignment, false);
  }
  FakeFetch fetch_;
  bool over_high_ = false;
  bool under_low_ = true;
  int high_reads_ = 0;
  int low_reads_ = 0;
};

TEST_F(FlowControlTest, FullBuffersHoldRecordsBackWithoutPausingTheFetcher) {
  flow_.UpdateBudgets(fetch_, kAssignment, /*stop_fetching=*/false);
  EXPECT_FALSE(flow_.holding());
  over_high_ = true;
  under_low_ = false;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_TRUE(flow_.holding());
  EXPECT_FALSE(flow_.paused());
  EXPECT_TRUE(flow_.snapshot().paused);
  // A librdkafka pause would purge what it fetched and resume up to a
  // second late: no call reaches the fetcher while holding.
  clock_.Advance(FlowControl::kHoldBeforePause - absl::Milliseconds(1));
  over_high_ = false;  // between the watermarks nothing changes
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_TRUE(flow_.holding());
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_FALSE(flow_.holding());
  EXPECT_FALSE(flow_.snapshot().paused);
  EXPECT_THAT(fetch_.calls, IsEmpty());
}

TEST_F(FlowControlTest, BuffersFullForTheHoldLimitPauseEverythingUntilTheyDrain) {
  HoldUntilPaused();
  EXPECT_FALSE(flow_.holding()) << "the loop polls again, so rebalances are served";
  EXPECT_TRUE(flow_.paused());
  EXPECT_EQ(fetch_.paused, std::set<TopicPartition>(kAssignment.begin(), kAssignment.end()));
  over_high_ = false;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_TRUE(flow_.paused());
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_FALSE(flow_.paused());
  EXPECT_FALSE(flow_.holding());
  EXPECT_THAT(fetch_.paused, IsEmpty());
  EXPECT_TRUE(flow_.snapshot().held.empty());
}

TEST(FlowControlHoldLimitTest, AShortMaxPollIntervalShortensTheHold) {
  EXPECT_EQ(FlowControl::HoldLimit(absl::Minutes(5)), FlowControl::kHoldBeforePause);
  EXPECT_EQ(FlowControl::HoldLimit(absl::Milliseconds(600)), absl::Milliseconds(300));
  testing::FakeClock clock;
  bool full = true;
  FlowControl flow(FlowControl::Budgets{[&] { return full; }, [&] { return !full; }},
                   /*stats=*/nullptr, &clock, FlowControl::HoldLimit(absl::Milliseconds(600)));
  FakeFetch fetch;
  flow.UpdateBudgets(fetch, kAssignment, false);
  clock.Advance(absl::Milliseconds(299));
  flow.UpdateBudgets(fetch, kAssignment, false);
  EXPECT_TRUE(flow.holding());
  clock.Advance(absl::Milliseconds(1));
  flow.UpdateBudgets(fetch, kAssignment, false);
  EXPECT_TRUE(flow.paused()) << "the loop polls again well within max.poll.interval.ms";
}

TEST_F(FlowControlTest, BuffersThatFillAgainHoldAfresh) {
  over_high_ = true;
  under_low_ = false;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  clock_.Advance(FlowControl::kHoldBeforePause / 2);
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // open
  under_low_ = false;
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // full again: the hold starts now
  clock_.Advance(FlowControl::kHoldBeforePause / 2);
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_TRUE(flow_.holding());
  EXPECT_THAT(fetch_.calls, IsEmpty());
}

TEST_F(FlowControlTest, OnlyTheWatermarkThatMattersIsRead) {
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_EQ(high_reads_, 1);
  EXPECT_EQ(low_reads_, 0);
  over_high_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // holds
  under_low_ = false;
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // stays holding
  clock_.Advance(FlowControl::kHoldBeforePause);
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // pauses
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // stays paused
  EXPECT_EQ(high_reads_, 2);
  EXPECT_EQ(low_reads_, 3);
}

TEST_F(FlowControlTest, StopFetchingPausesForGoodEvenWhenBuffersDrain) {
  over_high_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);  // holding: the stop pauses at once
  flow_.UpdateBudgets(fetch_, kAssignment, /*stop_fetching=*/true);
  EXPECT_TRUE(flow_.paused());
  flow_.UpdateBudgets(fetch_, kAssignment, true);
  EXPECT_TRUE(flow_.paused());
  EXPECT_EQ(fetch_.paused.size(), 3u);
  EXPECT_EQ(fetch_.calls.size(), 3u) << "paused once, not every round";
}

TEST_F(FlowControlTest, HeldPartitionsStayPausedWhenTheBudgetsResume) {
  flow_.UpdateHeld(fetch_, /*blocked=*/{kT0}, /*operator_paused=*/{kT1});
  EXPECT_EQ(fetch_.paused, (std::set<TopicPartition>{kT0, kT1}));
  HoldUntilPaused();
  over_high_ = false;
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_EQ(fetch_.paused, (std::set<TopicPartition>{kT0, kT1}));
  FlowControl::Snapshot snapshot = flow_.snapshot();
  EXPECT_FALSE(snapshot.paused);
  EXPECT_EQ(snapshot.held, (std::set<TopicPartition>{kT0, kT1}));
}

TEST_F(FlowControlTest, AReleasedPartitionResumesOnlyWhenNotAllArePaused) {
  flow_.UpdateHeld(fetch_, {kT0}, {});
  HoldUntilPaused();
  flow_.UpdateHeld(fetch_, {}, {});  // released while the budgets are full
  EXPECT_EQ(fetch_.paused.size(), 3u);
  EXPECT_TRUE(flow_.snapshot().held.empty());
  over_high_ = false;
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_THAT(fetch_.paused, IsEmpty());
}

TEST_F(FlowControlTest, UnchangedHoldsCallNothing) {
  flow_.UpdateHeld(fetch_, {kT0}, {kT0});
  const size_t calls = fetch_.calls.size();
  flow_.UpdateHeld(fetch_, {kT0}, {});
  flow_.UpdateHeld(fetch_, {}, {kT0});
  EXPECT_EQ(fetch_.calls.size(), calls);
  EXPECT_THAT(fetch_.calls, ElementsAre("pause t/0"));
}

TEST_F(FlowControlTest, NewPartitionsGetTheStateWantedNow) {
  flow_.ApplyToAssigned(fetch_, {kT2});
  EXPECT_THAT(fetch_.calls, ElementsAre("resume t/2"));
  over_high_ = true;
  flow_.UpdateBudgets(fetch_, {kT2}, false);
  fetch_.calls.clear();
  flow_.ApplyToAssigned(fetch_, {kT0});  // holding: the fetcher is not paused
  EXPECT_THAT(fetch_.calls, ElementsAre("resume t/0"));
  clock_.Advance(FlowControl::kHoldBeforePause);
  under_low_ = false;
  flow_.UpdateBudgets(fetch_, {kT2}, false);
  fetch_.calls.clear();
  flow_.ApplyToAssigned(fetch_, {kT0});
  EXPECT_THAT(fetch_.calls, ElementsAre("pause t/0"));
  flow_.ApplyToAssigned(fetch_, {});
  EXPECT_THAT(fetch_.calls, ElementsAre("pause t/0"));
}

TEST_F(FlowControlTest, ForgottenPartitionsAreHeldAfreshWhenTheyComeBack) {
  flow_.UpdateHeld(fetch_, {kT0}, {});
  flow_.Forget({kT0});  // revoked
  EXPECT_TRUE(flow_.snapshot().held.empty());
  fetch_.calls.clear();
  flow_.UpdateHeld(fetch_, {kT0}, {});  // re-assigned, still blocked
  EXPECT_THAT(fetch_.calls, ElementsAre("pause t/0"));
}

TEST_F(FlowControlTest, AFetcherThatFailsLeavesTheDecisionsIntact) {
  fetch_.fail = true;
  HoldUntilPaused();
  EXPECT_TRUE(flow_.paused());
  over_high_ = false;
  under_low_ = true;
  flow_.UpdateBudgets(fetch_, kAssignment, false);
  EXPECT_FALSE(flow_.paused());
}

}  // namespace
}  // namespace ferry
