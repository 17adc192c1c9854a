#include "core/engine/event_pool.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr EventPool::Limit kRoomy{1 << 20, int64_t{1} << 30};

std::unique_ptr<v1::Event> FullEvent(size_t payload_bytes) {
  auto event = std::make_unique<v1::Event>();
  event->set_id(7);
  event->set_topic("a-topic-name-longer-than-sso");
  event->set_partition(3);
  event->set_offset(99);
  event->set_key("key");
  event->set_type("type");
  event->set_payload(std::string(payload_bytes, 'x'));
  v1::Header* header = event->add_headers();
  header->set_key("h");
  header->set_value("v");
  event->set_timestamp_ms(5);
  event->set_attempt(2);
  event->set_deadline_ms(6);
  event->set_run_id(8);
  return event;
}

TEST(EventPoolTest, ARecycledEventComesBackEmptyWithItsPayloadBufferKept) {
  EventPool pool;
  std::unique_ptr<v1::Event> event = FullEvent(200);
  const v1::Event* address = event.get();
  pool.Recycle(std::move(event), kRoomy);
  ASSERT_EQ(pool.size(), 1u);
  std::vector<std::unique_ptr<v1::Event>> taken;
  pool.TakeInto(5, &taken);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(taken[0].get(), address);
  // Equal to a new Event on the wire and field by field...
  EXPECT_EQ(taken[0]->ByteSizeLong(), 0u);
  EXPECT_EQ(taken[0]->SerializeAsString(), v1::Event().SerializeAsString());
  EXPECT_EQ(taken[0]->headers_size(), 0);
  // ...but its payload's buffer is still there for the next record.
  EXPECT_GE(taken[0]->payload().capacity(), 200u);
}

TEST(EventPoolTest, BigEventsAreFreedNotKept) {
  EventPool pool;
  pool.Recycle(FullEvent(EventPool::kMaxRetainedBytes), kRoomy);
  EXPECT_EQ(pool.size(), 0u);
  pool.Recycle(FullEvent(100), kRoomy);
  EXPECT_EQ(pool.size(), 1u);
  pool.Recycle(nullptr, kRoomy);
  EXPECT_EQ(pool.size(), 1u);
}

// The limit is the engine's budget room: the pool never holds more events,
// or more bytes, than the consumer can still read records into.
TEST(EventPoolTest, KeepsNoMoreEventsThanTheLimitAndHandsOutWhatItHas) {
  EventPool pool;
  // Far more than the 4,096 a fixed bound kept: what the engine finishes
  // between the budget's low and high marks (max_buffered_events: 50,000).
  constexpr size_t kRoom = 25000;
  for (size_t i = 0; i < kRoom + 10; ++i) {
    pool.Recycle(FullEvent(10), EventPool::Limit{static_cast<int64_t>(kRoom), int64_t{1} << 30});
  }
  EXPECT_EQ(pool.size(), kRoom);
  std::vector<std::unique_ptr<v1::Event>> taken;
  pool.TakeInto(3, &taken);
  EXPECT_EQ(taken.size(), 3u);
  pool.TakeInto(kRoom, &taken);
  EXPECT_EQ(taken.size(), kRoom);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.retained_bytes(), 0);
  for (const auto& event : taken) EXPECT_EQ(event->ByteSizeLong(), 0u);
}

TEST(EventPoolTest, KeepsNoMoreBytesThanTheLimit) {
  EventPool pool;
  const int64_t each = static_cast<int64_t>(EventPool::RetainedBytes(*FullEvent(1000)));
  const EventPool::Limit limit{1000, 3 * each};
  for (int i = 0; i < 5; ++i) pool.Recycle(FullEvent(1000), limit);
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(pool.retained_bytes(), 3 * each);
  // A smaller room (the consumer read records meanwhile) keeps nothing more.
  pool.Recycle(FullEvent(1), EventPool::Limit{3, int64_t{1} << 30});
  EXPECT_EQ(pool.size(), 3u);
  std::vector<std::unique_ptr<v1::Event>> taken;
  pool.TakeInto(1, &taken);
  EXPECT_EQ(pool.retained_bytes(), 2 * each);
  pool.Recycle(std::move(taken[0]), limit);
  EXPECT_EQ(pool.size(), 3u);
}

}  // namespace
}  // namespace ferry
