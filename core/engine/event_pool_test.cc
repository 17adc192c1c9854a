#include "core/engine/event_pool.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

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
  pool.Recycle(std::move(event));
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
  pool.Recycle(FullEvent(EventPool::kMaxRetainedBytes));
  EXPECT_EQ(pool.size(), 0u);
  pool.Recycle(FullEvent(100));
  EXPECT_EQ(pool.size(), 1u);
  pool.Recycle(nullptr);
  EXPECT_EQ(pool.size(), 1u);
}

TEST(EventPoolTest, KeepsAtMostMaxEventsAndHandsOutWhatItHas) {
  EventPool pool;
  for (size_t i = 0; i < EventPool::kMaxEvents + 10; ++i) pool.Recycle(FullEvent(10));
  EXPECT_EQ(pool.size(), EventPool::kMaxEvents);
  std::vector<std::unique_ptr<v1::Event>> taken;
  pool.TakeInto(3, &taken);
  EXPECT_EQ(taken.size(), 3u);
  pool.TakeInto(EventPool::kMaxEvents, &taken);
  EXPECT_EQ(taken.size(), EventPool::kMaxEvents);
  EXPECT_EQ(pool.size(), 0u);
  for (const auto& event : taken) EXPECT_EQ(event->ByteSizeLong(), 0u);
}

}  // namespace
}  // namespace ferry
