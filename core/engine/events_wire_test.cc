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

// Measured once, then stamped as a delivery stamps it: the size the
// dispatcher computes is the real one, and the event it writes with the
// cached header sizes parses back whole.
TEST(EventsWireTest, SizeMeasuredOnceFitsEveryStamping) {
  v1::Event event = MakeEvent(9, 150);
  v1::Header* header = event.add_headers();
  header->set_key("trace");
  header->set_value(std::string(200, 'h'));  // a two-byte length inside a header
  event.set_attempt(1);
  const int64_t unstamped = UnstampedWireSize(event);
  struct Stamp {
    uint64_t id;
    int32_t attempt;
    int64_t deadline_ms;
    uint64_t run_id;
  };
  const Stamp stamps[] = {{1, 1, 1700000000000, 0},
                          {~uint64_t{0}, 2, 1700000000000, 5},
                          {300, -1, -5, ~uint64_t{0}},
                          {0, 0, 0, 0}};
  for (const Stamp& stamp : stamps) {
    event.set_id(stamp.id);
    event.set_attempt(stamp.attempt);
    event.set_deadline_ms(stamp.deadline_ms);
    event.set_run_id(stamp.run_id);
    const size_t size = DeliveredSize(event, unstamped);
    EXPECT_LE(static_cast<int64_t>(size), unstamped + kMaxStampedFieldsSize);
    EventsWire wire;
    EXPECT_TRUE(AppendEventWire(event, size, &wire));
    v1::Events parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire.bytes)) << stamp.id;
    ASSERT_EQ(parsed.events_size(), 1);
    EXPECT_EQ(parsed.events(0).SerializeAsString(), event.SerializeAsString()) << stamp.id;
    // Only now measure the whole event: the same size.
    EXPECT_EQ(size, event.ByteSizeLong()) << stamp.id;
  }
  EXPECT_EQ(DeliveredSize(event, -1), event.ByteSizeLong());
}

// A size that is off (a caller's bug) never writes past the buffer or
// leaves a malformed message: the event is measured again.
TEST(EventsWireTest, AWrongSizeIsCorrectedNotWritten) {
  const v1::Event event = MakeEvent(11, 100);
  const size_t size = event.ByteSizeLong();
  for (const size_t wrong : {size - 1, size + 1, size_t{0}, size * 2}) {
    EventsWire wire;
    EXPECT_FALSE(AppendEventWire(event, wrong, &wire)) << wrong;
    EXPECT_TRUE(AppendEventWire(event, size, &wire));
    EXPECT_EQ(wire.count, 2);
    v1::Events parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire.bytes)) << wrong;
    ASSERT_EQ(parsed.events_size(), 2);
    EXPECT_EQ(parsed.events(0).SerializeAsString(), event.SerializeAsString());
    EXPECT_EQ(parsed.events(1).SerializeAsString(), event.SerializeAsString());
  }
}

}  // namespace
}  // namespace ferry
