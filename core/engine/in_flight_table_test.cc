#include "core/engine/in_flight_table.h"

#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::ferry::testing::Queued;
using ::testing::UnorderedElementsAre;

const TopicPartition kP0{"t", 0};
const absl::Time kNow = absl::FromUnixSeconds(1000);

TEST(InFlightTableTest, DeliveryIdsCarryTheEpochAndAreNeverReused) {
  EXPECT_EQ(InFlightTable::MakeDeliveryId(3, 7) >> 40, 3u);
  EXPECT_EQ(InFlightTable::MakeDeliveryId(3, 7) & ((uint64_t{1} << 40) - 1), 7u);
  // Only 24 bits of epoch: a huge epoch wraps instead of spilling.
  EXPECT_EQ(InFlightTable::MakeDeliveryId(uint64_t{1} << 24, 1) >> 40, 0u);

  InFlightTable table;
  const v1::Event& first = table.Start(Queued(kP0, 1, 2), 10, kNow, absl::Seconds(5));
  const uint64_t id1 = first.id();
  EXPECT_EQ(id1 >> 40, 2u);
  EXPECT_EQ(first.deadline_ms(), absl::ToUnixMillis(kNow + absl::Seconds(5)));
  const uint64_t id2 = table.Start(Queued(kP0, 2, 2), 10, kNow, absl::Seconds(5)).id();
  EXPECT_NE(id1, id2);
  EXPECT_EQ(table.size(), 2);
}

TEST(InFlightTableTest, AResultCountsOnlyFromTheStreamHoldingIt) {
  InFlightTable table;
  const uint64_t id = table.Start(Queued(kP0, 1), 10, kNow, absl::Seconds(5)).id();
  EXPECT_EQ(table.Find(id, 11), nullptr);
  EXPECT_EQ(table.Find(id + 1, 10), nullptr);
  ASSERT_NE(table.Find(id, 10), nullptr);
  EXPECT_EQ(table.Take(id).queued.event->offset(), 1);
  EXPECT_FALSE(table.contains(id));
}

TEST(InFlightTableTest, ExpiryStreamLossAndSkipTakeTheirDeliveries) {
  InFlightTable table;
  table.Start(Queued(kP0, 1), 10, kNow, absl::Seconds(1));
  table.Start(Queued(kP0, 2), 10, kNow, absl::Seconds(9));
  table.Start(Queued(kP0, 3), 11, kNow, absl::Seconds(9));
  table.Start(Queued({"t", 1}, 4, 5), 11, kNow, absl::Seconds(9));

  auto expired = table.TakeExpired(kNow + absl::Seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].second.queued.event->offset(), 1);

  EXPECT_EQ(table.CountByPartition().at(kP0), 2);
  EXPECT_FALSE(table.TakeOffset({"t", 1}, 4, /*epoch=*/4).has_value());  // wrong epoch
  ASSERT_TRUE(table.TakeOffset({"t", 1}, 4, 5).has_value());

  std::vector<int64_t> lost;
  for (const QueuedEvent& queued : table.TakeStream(10)) lost.push_back(queued.event->offset());
  EXPECT_THAT(lost, UnorderedElementsAre(2));
  EXPECT_EQ(table.CountIf([](const v1::Event&) { return true; }), 1);

  std::vector<int64_t> removed;
  table.RemoveIf([](const QueuedEvent&) { return true; },
                 [&removed](InFlightTable::Delivery&& d) {
                   removed.push_back(d.queued.event->offset());
                 });
  EXPECT_THAT(removed, UnorderedElementsAre(3));
  EXPECT_EQ(table.size(), 0);
}

}  // namespace
}  // namespace ferry
