#include "core/engine/lane_queue.h"

#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// Move-only and heap-owning, like QueuedEvent: a lost or doubly destroyed
// item shows up as a wrong value here and as a leak or double free under ASan.
using Item = std::unique_ptr<int>;
Item Make(int value) { return std::make_unique<int>(value); }

std::vector<int> Values(LaneQueue<Item>& queue) {
  std::vector<int> values;
  for (size_t index = 0; index < queue.size(); ++index) values.push_back(*queue[index]);
  return values;
}

TEST(LaneQueueTest, AnEmptyQueueHoldsNoSlots) {
  LaneQueue<Item> queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.capacity(), 0u);
}

TEST(LaneQueueTest, ItemsLeaveInTheOrderTheyCame) {
  LaneQueue<Item> queue;
  for (int value = 0; value < 100; ++value) queue.push_back(Make(value));
  for (int value = 0; value < 100; ++value) EXPECT_EQ(*queue.pop_front(), value);
  EXPECT_TRUE(queue.empty());
}

TEST(LaneQueueTest, GrowingWhileWrappedKeepsTheOrder) {
  LaneQueue<Item> queue;
  for (int value = 0; value < 4; ++value) queue.push_back(Make(value));
  (void)queue.pop_front();
  (void)queue.pop_front();
  queue.push_back(Make(4));
  queue.push_back(Make(5));  // wraps around the four slots
  queue.push_front(Make(1));
  queue.push_back(Make(6));  // grows while wrapped
  EXPECT_EQ(Values(queue), (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

TEST(LaneQueueTest, InsertPutsTheItemAtItsIndex) {
  LaneQueue<Item> queue;
  queue.push_back(Make(1));
  queue.push_back(Make(3));
  queue.insert(1, Make(2));
  queue.insert(0, Make(0));
  queue.insert(4, Make(4));
  EXPECT_EQ(Values(queue), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(LaneQueueTest, PartitionKeepsBothSidesInOrder) {
  LaneQueue<Item> queue;
  for (int value = 0; value < 10; ++value) queue.push_back(Make(value));
  std::vector<int> removed;
  queue.Partition([](const Item& item) { return *item % 3 != 0; },
                  [&removed](Item item) { removed.push_back(*item); });
  EXPECT_EQ(Values(queue), (std::vector<int>{1, 2, 4, 5, 7, 8}));
  EXPECT_EQ(removed, (std::vector<int>{0, 3, 6, 9}));
}

TEST(LaneQueueTest, ASmallLaneKeepsItsSlotsAndABigOneGivesThemBack) {
  LaneQueue<Item> small;
  for (int value = 0; value < 3; ++value) small.push_back(Make(value));
  while (!small.empty()) (void)small.pop_front();
  EXPECT_EQ(small.capacity(), 4u);  // no allocation the next time

  LaneQueue<Item> big;
  for (int value = 0; value < 100; ++value) big.push_back(Make(value));
  while (!big.empty()) (void)big.pop_front();
  EXPECT_EQ(big.capacity(), 0u);
}

TEST(LaneQueueTest, ItemsStillQueuedAreDestroyedWithTheQueue) {
  auto shared = std::make_shared<int>(7);
  {
    LaneQueue<std::shared_ptr<int>> queue;
    for (int copy = 0; copy < 10; ++copy) queue.push_back(shared);
    (void)queue.pop_front();
    EXPECT_EQ(shared.use_count(), 10);
  }
  EXPECT_EQ(shared.use_count(), 1);
}

TEST(LaneQueueTest, MovingAQueueMovesItsItems) {
  LaneQueue<Item> queue;
  queue.push_back(Make(1));
  queue.push_back(Make(2));
  LaneQueue<Item> moved(std::move(queue));
  EXPECT_EQ(Values(moved), (std::vector<int>{1, 2}));
  queue = std::move(moved);
  EXPECT_EQ(Values(queue), (std::vector<int>{1, 2}));
}

// Random operations against std::deque as the model.
TEST(LaneQueueTest, MatchesADequeUnderRandomOperations) {
  std::mt19937 random(17);
  LaneQueue<Item> queue;
  std::deque<int> model;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    switch (random() % 5) {
      case 0:
      case 1:
        queue.push_back(Make(next));
        model.push_back(next++);
        break;
      case 2:
        queue.push_front(Make(next));
        model.push_front(next++);
        break;
      case 3: {
        const size_t at = random() % (model.size() + 1);
        queue.insert(at, Make(next));
        model.insert(model.begin() + static_cast<std::ptrdiff_t>(at), next++);
        break;
      }
      default:
        // Pops more often than it pushes at times, so it empties and regrows.
        for (int pops = static_cast<int>(random() % 8); pops > 0 && !model.empty(); --pops) {
          ASSERT_EQ(*queue.pop_front(), model.front());
          model.pop_front();
        }
        break;
    }
    ASSERT_EQ(queue.size(), model.size());
  }
  EXPECT_EQ(Values(queue), std::vector<int>(model.begin(), model.end()));
}

}  // namespace
}  // namespace ferry
