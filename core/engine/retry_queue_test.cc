#include "core/engine/retry_queue.h"

#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::ferry::testing::Queued;
using ::testing::ElementsAre;

const TopicPartition kP0{"t", 0};
const absl::Time kNow = absl::FromUnixSeconds(1000);

ProcessorConfig Processor() {
  ProcessorConfig processor;
  processor.retry_backoff = absl::Milliseconds(100);
  processor.retry_backoff_max = absl::Seconds(1);
  return processor;
}

TEST(RetryQueueTest, TheBackoffGrowsPerAttemptWithJitterUpToTheMax) {
  RetryQueue queue;
  const ProcessorConfig processor = Processor();
  for (int i = 0; i < 200; ++i) {
    const absl::Duration first = queue.Delay(processor, 1, 0);
    EXPECT_GE(first, absl::Milliseconds(50));
    EXPECT_LE(first, absl::Milliseconds(100));
    const absl::Duration third = queue.Delay(processor, 3, 0);
    EXPECT_GE(third, absl::Milliseconds(200));
    EXPECT_LE(third, absl::Milliseconds(400));
    EXPECT_LE(queue.Delay(processor, 1000, 0), absl::Seconds(1));
  }
}

TEST(RetryQueueTest, TheWorkersRetryAfterIsHonouredOnlyUpToTheMax) {
  RetryQueue queue;
  const ProcessorConfig processor = Processor();
  EXPECT_EQ(queue.Delay(processor, 1, 700), absl::Milliseconds(700));
  // 4e9 ms would park the lane for 49 days.
  EXPECT_EQ(queue.Delay(processor, 1, 4000000000u), absl::Seconds(1));
}

TEST(RetryQueueTest, DueEventsLeaveEarliestFirstAndOthersWait) {
  RetryQueue queue;
  queue.Schedule(kNow + absl::Seconds(2), Queued(kP0, 2));
  queue.Schedule(kNow + absl::Seconds(1), Queued(kP0, 1));
  queue.Schedule(kNow + absl::Seconds(5), Queued(kP0, 5));
  std::vector<int64_t> due;
  auto collect = [&due](QueuedEvent queued) { due.push_back(queued.event->offset()); };
  queue.PopDue(kNow, collect);
  EXPECT_TRUE(due.empty());
  queue.PopDue(kNow + absl::Seconds(2), collect);
  EXPECT_THAT(due, ElementsAre(1, 2));
  EXPECT_EQ(queue.size(), 1);
}

TEST(RetryQueueTest, SkipAndRevokeTakeWaitingEvents) {
  RetryQueue queue;
  queue.Schedule(kNow, Queued(kP0, 1));
  queue.Schedule(kNow, Queued({"t", 1}, 1));
  EXPECT_FALSE(queue.TakeOffset(kP0, 9).has_value());
  ASSERT_TRUE(queue.TakeOffset(kP0, 1).has_value());
  std::vector<int64_t> removed;
  queue.RemoveIf([](const QueuedEvent& q) { return q.event->partition() == 1; },
                 [&removed](QueuedEvent q) { removed.push_back(q.event->offset()); });
  EXPECT_THAT(removed, ElementsAre(1));
  EXPECT_EQ(queue.size(), 0);
}

}  // namespace
}  // namespace ferry
