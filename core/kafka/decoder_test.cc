#include "core/kafka/decoder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/decoder_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::MustCreate;
using ::ferry::testing::Topic;
using ::testing::HasSubstr;

using Kind = FieldSource::Kind;

RawRecord Record(const std::string& topic, std::string payload) {
  RawRecord record;
  record.topic = topic;
  record.partition = 3;
  record.offset = 1234;
  record.key = "k1";
  record.payload = std::move(payload);
  record.timestamp_ms = 1700000000123;
  return record;
}

// Decodes and expects an InvalidArgument error; returns its message.
std::string DecodeError(const Decoder& decoder, const RawRecord& record) {
  absl::StatusOr<v1::Event> event = decoder.Decode(record);
  EXPECT_FALSE(event.ok()) << event->DebugString();
  if (event.ok()) return "";
  EXPECT_EQ(event.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(event.status().message());
}

TEST(DecoderTest, FillsEveryRecordField) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""},
                                   {Kind::kTopic, ""})});
  RawRecord record = Record("orders", "{\"a\":1}");
  record.headers = {{"h1", "v1"}, {"h2", ""}, {"h1", "v2"}};
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->topic(), "orders");
  EXPECT_EQ(event->partition(), 3);
  EXPECT_EQ(event->offset(), 1234);
  EXPECT_EQ(event->key(), "k1");
  EXPECT_EQ(event->type(), "orders");
  EXPECT_EQ(event->payload(), "{\"a\":1}");
  ASSERT_EQ(event->headers_size(), 3);
  EXPECT_EQ(event->headers(0).key(), "h1");
  EXPECT_EQ(event->headers(0).value(), "v1");
  EXPECT_EQ(event->headers(1).key(), "h2");
  EXPECT_EQ(event->headers(1).value(), "");
  EXPECT_EQ(event->headers(2).key(), "h1");
  EXPECT_EQ(event->headers(2).value(), "v2");
  EXPECT_EQ(event->timestamp_ms(), 1700000000123);
  EXPECT_EQ(event->id(), 0u);
  EXPECT_EQ(event->attempt(), 0);
  EXPECT_EQ(event->deadline_ms(), 0);
}

TEST(DecoderTest, RecordKeyIsBytesAndNullKeyIsEmpty) {
  auto decoder = MustCreate({});
  RawRecord record = Record("orders", "not json");
  record.key = std::string("a\0b\xff", 4);
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), std::string("a\0b\xff", 4));

  record.key.reset();
  event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "");
}

TEST(DecoderTest, UnconfiguredTopicUsesDefaults) {
  auto decoder = MustCreate({Topic("orders", {Kind::kConstant, "x"},
                                   {Kind::kConstant, "y"})});
  absl::StatusOr<v1::Event> event =
      decoder->Decode(Record("payments", "binary\x01"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "k1");
  EXPECT_EQ(event->type(), "payments");
  EXPECT_EQ(event->payload(), "binary\x01");
}

TEST(DecoderTest, HeaderSourceLastOneWins) {
  auto decoder = MustCreate({Topic("orders", {Kind::kHeader, "order-id"},
                                   {Kind::kHeader, "event-type"})});
  RawRecord record = Record("orders", "");
  record.headers = {{"event-type", "old"},
                    {"order-id", "o-7"},
                    {"event-type", "order.created"}};
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "o-7");
  EXPECT_EQ(event->type(), "order.created");
  // The Event still carries every header, duplicates included.
  EXPECT_EQ(event->headers_size(), 3);
}

TEST(DecoderTest, MissingHeaderIsPoison) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""},
                                   {Kind::kHeader, "event-type"})});
  RawRecord record = Record("orders", "");
  record.headers = {{"Event-Type", "case matters"}};
  EXPECT_EQ(DecodeError(*decoder, record),
            "orders/3@1234: type: header \"event-type\" is missing");

  auto key_decoder = MustCreate({Topic("orders", {Kind::kHeader, "id"},
                                       {Kind::kTopic, ""})});
  EXPECT_EQ(DecodeError(*key_decoder, record),
            "orders/3@1234: key: header \"id\" is missing");
}

TEST(DecoderTest, JsonSource) {
  auto decoder = MustCreate({Topic("orders", {Kind::kJson, "/user/id"},
                                   {Kind::kJson, "/meta/type"})});
  absl::StatusOr<v1::Event> event = decoder->Decode(Record(
      "orders",
      R"({"user": {"id": "u-42"}, "meta": {"type": "order.created"}})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "u-42");
  EXPECT_EQ(event->type(), "order.created");
}

TEST(DecoderTest, JsonNumbersAndBooleansAreDumped) {
  auto decoder = MustCreate({Topic("orders", {Kind::kJson, "/id"},
                                   {Kind::kJson, "/flag"})});
  absl::StatusOr<v1::Event> event =
      decoder->Decode(Record("orders", R"({"id": 12345, "flag": true})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "12345");
  EXPECT_EQ(event->type(), "true");

  event = decoder->Decode(Record("orders", R"({"id": -1.5, "flag": false})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "-1.5");
  EXPECT_EQ(event->type(), "false");
}

TEST(DecoderTest, JsonPointerEscapesAndArrays) {
  auto decoder = MustCreate({Topic("orders", {Kind::kJson, "/items/1/a~1b"},
                                   {Kind::kJson, "/m~0n"})});
  absl::StatusOr<v1::Event> event = decoder->Decode(Record(
      "orders", R"({"items": [{}, {"a/b": "second"}], "m~n": "tilde"})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "second");
  EXPECT_EQ(event->type(), "tilde");
}

TEST(DecoderTest, MovingDecodeGivesTheSameEventAndKeepsThePoisonWhole) {
  auto decoder = MustCreate({Topic("orders", {Kind::kJson, "/id"}, {Kind::kTopic, ""})});
  RawRecord record = Record("orders", R"({"id": "u7"})");
  record.headers = {{"h1", "v1"}};
  absl::StatusOr<v1::Event> copied = decoder->Decode(record);
  ASSERT_TRUE(copied.ok()) << copied.status();
  absl::StatusOr<v1::Event> moved = decoder->Decode(std::move(record));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->SerializeAsString(), copied->SerializeAsString());
  EXPECT_EQ(moved->key(), "u7");
  EXPECT_EQ(record.key, "k1");  // the record key is never taken

  // A record that fails to decode is left whole for its dead-letter record.
  RawRecord poison = Record("orders", R"({"name": "x"})");
  poison.headers = {{"h1", "v1"}};
  EXPECT_FALSE(decoder->Decode(std::move(poison)).ok());
  EXPECT_EQ(poison.topic, "orders");
  EXPECT_EQ(poison.payload, R"({"name": "x"})");
  ASSERT_EQ(poison.headers.size(), 1u);
  EXPECT_EQ(poison.headers[0].second, "v1");
}

// DecodeInto reuses the caller's Event: nothing of the previous record may
// survive into the next one (a null key, no headers, no timestamp).
TEST(DecoderTest, DecodeIntoAReusedEventKeepsNothingOfThePreviousRecord) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""}, {Kind::kTopic, ""})});
  v1::Event event;
  RawRecord first = Record("orders", "first");
  first.headers = {{"h1", "v1"}};
  ASSERT_TRUE(decoder->DecodeInto(first, &event).ok());
  EXPECT_EQ(event.key(), "k1");
  EXPECT_EQ(event.headers_size(), 1);
  EXPECT_EQ(event.payload(), "first");
  event.set_attempt(3);  // set downstream, e.g. by the engine

  RawRecord second;
  second.topic = "orders";
  second.offset = 7;
  second.payload = "second";
  ASSERT_TRUE(decoder->DecodeInto(second, &event).ok());
  v1::Event expected;
  expected.set_topic("orders");
  expected.set_type("orders");
  expected.set_offset(7);
  expected.set_payload("second");
  EXPECT_EQ(event.SerializeAsString(), expected.SerializeAsString()) << event.DebugString();

  // A poison record leaves the record whole.
  auto json_decoder = MustCreate({Topic("orders", {Kind::kJson, "/id"}, {Kind::kTopic, ""})});
  RawRecord poison = Record("orders", "not json");
  EXPECT_FALSE(json_decoder->DecodeInto(poison, &event).ok());
  EXPECT_EQ(poison.topic, "orders");
  EXPECT_EQ(poison.payload, "not json");
}

// The consumer reads every record into one RawRecord and decodes it into a
// recycled Event: the event's old buffers must come back to the record, or
// each record would allocate its payload and topic again.
TEST(DecoderTest, DecodeIntoHandsTheReusedEventsBuffersToTheRecord) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""}, {Kind::kTopic, ""})});
  v1::Event event;
  event.set_payload(std::string(2000, 'p'));
  event.set_topic(std::string(300, 't'));
  RawRecord record = Record("orders", "small");
  ASSERT_TRUE(decoder->DecodeInto(record, &event).ok());
  EXPECT_EQ(event.payload(), "small");
  EXPECT_EQ(event.topic(), "orders");
  EXPECT_TRUE(record.payload.empty());
  EXPECT_TRUE(record.topic.empty());
  EXPECT_GE(record.payload.capacity(), 2000u);
  EXPECT_GE(record.topic.capacity(), 300u);
}

TEST(DecoderTest, JsonMissingFieldIsPoison) {
  auto decoder = MustCreate({Topic("orders", {Kind::kJson, "/user/id"},
                                   {Kind::kConstant, "t"})});
  std::string message =
      DecodeError(*decoder, Record("orders", R"({"user": {"name": "x"}})"));
  EXPECT_THAT(message, HasSubstr("orders/3@1234: key: "));
  EXPECT_THAT(message, HasSubstr("/user/id"));
  EXPECT_THAT(message, HasSubstr("missing"));

  // A scalar where the pointer needs an object.
  message = DecodeError(*decoder, Record("orders", R"({"user": 5})"));
  EXPECT_THAT(message, HasSubstr("missing"));

  // Objects, arrays and null are not usable as a key or type.
  message = DecodeError(*decoder, Record("orders", R"({"user": {"id": {}}})"));
  EXPECT_THAT(message, HasSubstr("is an object"));
  message =
      DecodeError(*decoder, Record("orders", R"({"user": {"id": null}})"));
  EXPECT_THAT(message, HasSubstr("is null"));
}

TEST(DecoderTest, JsonArrayIndexOutOfRangeOrHugeIsMissingNotACrash) {
  auto decoder = MustCreate(
      {Topic("a", {Kind::kJson, "/xs/5"}, {Kind::kTopic, ""}),
       Topic("b", {Kind::kJson, "/xs/99999999999999999999999"},
             {Kind::kTopic, ""}),
       Topic("c", {Kind::kJson, "/xs/01"}, {Kind::kTopic, ""}),
       Topic("d", {Kind::kJson, "/xs/-"}, {Kind::kTopic, ""})});
  for (const char* topic : {"a", "b", "c", "d"}) {
    std::string message =
        DecodeError(*decoder, Record(topic, R"({"xs": [1, 2]})"));
    EXPECT_THAT(message, HasSubstr("missing")) << topic;
  }
  // The same pointer works as an object key.
  absl::StatusOr<v1::Event> event = decoder->Decode(
      Record("b", R"({"xs": {"99999999999999999999999": "big"}})"));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "big");
}

TEST(DecoderTest, PayloadNotJsonIsPoison) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""},
                                   {Kind::kJson, "/type"})});
  std::string message = DecodeError(*decoder, Record("orders", "{\"type\":"));
  EXPECT_THAT(message, HasSubstr("orders/3@1234: type: "));
  EXPECT_THAT(message, HasSubstr("not valid JSON"));
  message = DecodeError(*decoder, Record("orders", ""));
  EXPECT_THAT(message, HasSubstr("not valid JSON"));
}

TEST(DecoderTest, NonUtf8TypeIsPoison) {
  auto decoder = MustCreate({Topic("orders", {Kind::kRecordKey, ""},
                                   {Kind::kHeader, "type"})});
  RawRecord record = Record("orders", "");
  record.headers = {{"type", "\xc3\x28"}};
  EXPECT_THAT(DecodeError(*decoder, record), HasSubstr("UTF-8"));
  record.headers = {{"type", "caf\xc3\xa9"}};
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->type(), "caf\xc3\xa9");
}

TEST(DecoderTest, TopicAndConstantSources) {
  auto decoder = MustCreate({Topic("orders", {Kind::kTopic, ""},
                                   {Kind::kConstant, "order.event"})});
  absl::StatusOr<v1::Event> event = decoder->Decode(Record("orders", ""));
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->key(), "orders");
  EXPECT_EQ(event->type(), "order.event");
}

TEST(DecoderTest, CreateRejectsMalformedPointer) {
  for (const char* pointer : {"a/b", "/a~2", "/a~"}) {
    absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(
        {Topic("orders", {Kind::kJson, pointer}, {Kind::kTopic, ""})});
    ASSERT_FALSE(decoder.ok()) << pointer;
    EXPECT_EQ(decoder.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(decoder.status().message()),
                HasSubstr("\"orders\": key: invalid JSON Pointer"))
        << pointer;
  }
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(
      {Topic("orders", {Kind::kRecordKey, ""}, {Kind::kJson, "type"})});
  ASSERT_FALSE(decoder.ok());
  EXPECT_THAT(std::string(decoder.status().message()), HasSubstr("type:"));
}

TEST(DecoderTest, CreateRejectsDuplicateTopics) {
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(
      {Topic("orders", {Kind::kRecordKey, ""}, {Kind::kTopic, ""}),
       Topic("orders", {Kind::kHeader, "k"}, {Kind::kTopic, ""})});
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(decoder.status().message()),
              HasSubstr("\"orders\" is configured twice"));
}

TEST(DecoderTest, CreateRejectsEmptyHeaderName) {
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(
      {Topic("orders", {Kind::kHeader, ""}, {Kind::kTopic, ""})});
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
