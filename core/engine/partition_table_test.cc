#include "core/engine/partition_table.h"

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::ferry::testing::Queued;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const TopicPartition kP0{"t", 0};
const TopicPartition kP1{"t", 1};

class PartitionTableTest : public ::testing::Test {
 protected:
  std::atomic<uint64_t> generation_{0};
  PartitionTable table_{&generation_};
  const absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(PartitionTableTest, EachAssignmentAndResetIsANewEpochThatFencesTheOldOne) {
  table_.Assign(kP0);
  PartitionTable::Entry* entry = table_.Find(kP0);
  ASSERT_NE(entry, nullptr);
  const uint64_t first = entry->epoch;
  ASSERT_TRUE(table_.Begin(*entry, 5, now_));
  QueuedEvent old = Queued(kP0, 5, first);
  EXPECT_EQ(table_.FindCurrent(old), entry);

  table_.Renew(*entry);
  EXPECT_GT(entry->epoch, first);
  EXPECT_EQ(table_.FindCurrent(old), nullptr);
  // A late finish of the old epoch changes nothing.
  table_.Finish(old);
  EXPECT_FALSE(entry->state.CommitOffset().has_value());
  EXPECT_EQ(table_.Find(kP1), nullptr);
}

// Find by (topic, partition) goes through an index of entry pointers: it
// must answer for the exact key only and must not outlive an erased entry.
TEST_F(PartitionTableTest, FindByViewMatchesTheExactPartitionAndForgetsErasedOnes) {
  const std::string long_topic(40, 'x');  // past the short-string buffer
  table_.Assign(kP0);
  table_.Assign(kP1);
  table_.Assign(TopicPartition{long_topic, 0});
  PartitionTable::Entry* p0 = table_.Find(kP0);
  PartitionTable::Entry* p1 = table_.Find(kP1);
  ASSERT_NE(p0, nullptr);
  ASSERT_NE(p1, nullptr);
  EXPECT_NE(p0, p1);
  EXPECT_EQ(table_.Find(std::string_view("t"), 0), p0);
  EXPECT_EQ(table_.Find(std::string_view("t"), 1), p1);
  EXPECT_EQ(table_.Find(std::string_view("t"), 2), nullptr);
  EXPECT_EQ(table_.Find(std::string_view("u"), 1), nullptr);
  EXPECT_EQ(table_.Find(std::string_view("tt"), 1), nullptr);
  EXPECT_NE(table_.Find(long_topic, 0), nullptr);
  EXPECT_EQ(table_.Find(long_topic.substr(1), 0), nullptr);

  EXPECT_EQ(table_.Find(std::string_view("t"), -1), nullptr);
  const TopicPartition unassigned{"t", -1};  // librdkafka's "unassigned" partition
  table_.Assign(unassigned);
  EXPECT_NE(table_.Find(unassigned), nullptr);
  table_.Erase(unassigned);
  EXPECT_EQ(table_.Find(unassigned), nullptr);
  EXPECT_EQ(table_.Find(std::string_view("t"), 1000), nullptr);
  table_.Erase(kP1);
  EXPECT_EQ(table_.Find(kP1), nullptr);
  EXPECT_EQ(table_.Find(std::string_view("t"), 1), nullptr);
  EXPECT_EQ(table_.Find(kP0), p0);
  table_.Assign(kP1);
  EXPECT_NE(table_.Find(kP1), nullptr);
  EXPECT_NE(table_.Find(kP1), p0);
}

TEST_F(PartitionTableTest, DuplicatesAreRefusedAndFinishingAdvancesTheCommit) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  ASSERT_TRUE(table_.Begin(entry, 10, now_));
  ASSERT_TRUE(table_.Begin(entry, 11, now_ + absl::Seconds(1)));
  EXPECT_FALSE(table_.Begin(entry, 10, now_));
  EXPECT_EQ(entry.buffered, 2);

  table_.Finish(Queued(kP0, 11, entry.epoch));
  EXPECT_TRUE(table_.PendingCommits().empty());  // 10 still holds the commit
  table_.Finish(Queued(kP0, 10, entry.epoch));
  const std::vector<CommitPosition> pending = table_.PendingCommits();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].offset, 12);
  EXPECT_EQ(entry.state.Pending(), 0u);

  table_.MarkCommitted(pending);
  EXPECT_TRUE(table_.PendingCommits().empty());
  EXPECT_EQ(table_.StillCurrent(pending).size(), 1u);
  table_.Renew(entry);
  EXPECT_TRUE(table_.StillCurrent(pending).empty());
}

TEST_F(PartitionTableTest, CommitPositionsOfAnOlderEpochAreNotMarked) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  ASSERT_TRUE(table_.Begin(entry, 0, now_));
  table_.Finish(Queued(kP0, 0, entry.epoch));
  table_.MarkCommitted({{kP0, 1, entry.epoch + 7}});
  EXPECT_EQ(table_.PendingCommits().size(), 1u);
}

TEST_F(PartitionTableTest, PauseParksInOrderAndLaterAssignmentsStartPaused) {
  table_.Assign(kP0);
  PartitionTable::PauseChange change = table_.SetPaused({kP0, kP1});
  EXPECT_THAT(change.newly_paused, ElementsAre(kP0));  // P1 is not assigned yet
  table_.Assign(kP1);
  EXPECT_TRUE(table_.Find(kP1)->paused);

  QueuedEvent a = Queued(kP0, 1);
  QueuedEvent b = Queued(kP0, 2);
  QueuedEvent c = Queued(kP0, 0);
  ASSERT_TRUE(table_.ParkIfPaused(a, /*front=*/false));
  ASSERT_TRUE(table_.ParkIfPaused(b, /*front=*/false));
  ASSERT_TRUE(table_.ParkIfPaused(c, /*front=*/true));

  change = table_.SetPaused({});
  EXPECT_THAT(change.resumed, ElementsAre(kP0, kP1));
  std::vector<int64_t> offsets;
  for (const QueuedEvent& queued : table_.TakeParked(kP0)) {
    offsets.push_back(queued.event->offset());
  }
  EXPECT_THAT(offsets, ElementsAre(0, 1, 2));
  QueuedEvent d = Queued(kP0, 3);
  EXPECT_FALSE(table_.ParkIfPaused(d, false));
}

TEST_F(PartitionTableTest, BlocksBumpTheGenerationAndAreDroppedWithTheirLane) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  ASSERT_TRUE(table_.Begin(entry, 4, now_));
  table_.Block(Queued(kP0, 4, entry.epoch, /*lane=*/3));
  EXPECT_EQ(generation_.load(), 1u);
  EXPECT_THAT(table_.BlockedPartitions(), ElementsAre(kP0));
  table_.Block(Queued(kP0, 9, entry.epoch + 1));  // a stale epoch is not held
  EXPECT_EQ(entry.blocked.size(), 1u);

  table_.SetPaused({kP0});
  table_.Park(Queued(kP0, 5, entry.epoch));
  std::vector<std::pair<int64_t, bool>> released;
  table_.DropHeld({kP0}, [&released](const QueuedEvent& queued, bool holds_lane) {
    released.emplace_back(queued.event->offset(), holds_lane);
  });
  EXPECT_THAT(released, ElementsAre(std::make_pair(int64_t{4}, true),
                                    std::make_pair(int64_t{5}, false)));
  EXPECT_EQ(generation_.load(), 2u);
  EXPECT_TRUE(table_.BlockedPartitions().empty());
  EXPECT_EQ(entry.buffered, 0);
}

TEST_F(PartitionTableTest, TakeBlockedOnlyTakesAHeldOffset) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  table_.Block(Queued(kP0, 4, entry.epoch));
  EXPECT_FALSE(table_.TakeBlocked(entry, 5).has_value());
  EXPECT_EQ(generation_.load(), 1u);
  ASSERT_TRUE(table_.TakeBlocked(entry, 4).has_value());
  EXPECT_EQ(generation_.load(), 2u);
}

TEST_F(PartitionTableTest, UnskippableOffsetsAreExplained) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  EXPECT_THAT(PartitionTable::DescribeUnskippable(entry, kP0, 3),
              HasSubstr("has no unfinished offset"));
  ASSERT_TRUE(table_.Begin(entry, 10, now_));
  ASSERT_TRUE(table_.Begin(entry, 11, now_));
  EXPECT_THAT(PartitionTable::DescribeUnskippable(entry, kP0, 11),
              HasSubstr("queued behind the commit blocker"));
  EXPECT_THAT(PartitionTable::DescribeUnskippable(entry, kP0, 2),
              HasSubstr("already finished or not consumed"));
  EXPECT_THAT(PartitionTable::DescribeUnskippable(entry, kP0, 2),
              HasSubstr("lowest unfinished offset is 10"));
}

TEST_F(PartitionTableTest, SnapshotAgesTheCommitBlocker) {
  table_.Assign(kP0);
  PartitionTable::Entry& entry = *table_.Find(kP0);
  ASSERT_TRUE(table_.Begin(entry, 10, now_));
  ASSERT_TRUE(table_.Begin(entry, 11, now_ + absl::Seconds(5)));
  table_.Finish(Queued(kP0, 10, entry.epoch));
  EngineSnapshot snapshot;
  table_.AddToSnapshot({{kP0, 1}}, &snapshot);
  ASSERT_EQ(snapshot.partitions.size(), 1u);
  const PartitionSnapshot& partition = snapshot.partitions[0];
  EXPECT_EQ(partition.commit_offset, 11);
  EXPECT_EQ(partition.lowest_unfinished, 11);
  EXPECT_EQ(partition.oldest_unfinished_since, now_ + absl::Seconds(5));
  EXPECT_EQ(partition.start_offset, 10);
  EXPECT_EQ(partition.in_flight, 1);
  EXPECT_EQ(partition.buffered, 1);
}

}  // namespace
}  // namespace ferry
