#include "core/engine/events_wire.h"

#include <string>

#include "ferry/v1/processor.pb.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

v1::Event MakeEvent(int64_t offset, size_t payload_size) {
  v1::Event event;
  event.set_topic("orders");
  event.set_partition(3);
  event.set_offset(offset);
  event.set_payload(std::string(payload_size, 'x'));
  return event;
}

TEST(EventsWireTest, AppendedEventsParseAsOneEventsMessage) {
  EventsWire wire;
  // A small event (one-byte length) and one whose length needs two varint bytes.
  const v1::Event small = MakeEvent(7, 3);
  const v1::Event large = MakeEvent(8, 300);
  AppendEventWire(small, small.ByteSizeLong(), &wire);
  AppendEventWire(large, large.ByteSizeLong(), &wire);
  EXPECT_EQ(wire.count, 2);
  v1::Events parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.bytes));
  ASSERT_EQ(parsed.events_size(), 2);
  EXPECT_EQ(parsed.events(0).offset(), 7);
  EXPECT_EQ(parsed.events(1).payload().size(), 300u);
}

TEST(EventsWireTest, Field1HeaderWrapsEventsAsAProcessRequest) {
  EventsWire wire;
  const v1::Event event = MakeEvent(42, 200);
  AppendEventWire(event, event.ByteSizeLong(), &wire);
  uint8_t header[kEventFraming];
  const uint8_t* end = WriteField1Header(wire.bytes.size(), header);
  const std::string request =
      std::string(reinterpret_cast<const char*>(header), static_cast<size_t>(end - header)) +
      wire.bytes;
  v1::ProcessRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(request));
  ASSERT_TRUE(parsed.has_events());
  ASSERT_EQ(parsed.events().events_size(), 1);
  EXPECT_EQ(parsed.events().events(0).offset(), 42);
  // What protobuf itself writes for the same message.
  EXPECT_EQ(request, parsed.SerializeAsString());
}

TEST(EventsWireTest, HeaderNeverExceedsTheFramingBound) {
  uint8_t header[kEventFraming];
  const uint8_t* end = WriteField1Header(~size_t{0}, header);
  EXPECT_EQ(end - header, kEventFraming);
  EXPECT_EQ(header[0], 0x0a);
}

}  // namespace
}  // namespace ferry
