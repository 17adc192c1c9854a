// The Decoder never builds an Event a conforming worker must reject: every
// proto3 `string` field it fills from record bytes is valid UTF-8, whatever
// the record holds. Header names that are not UTF-8 are delivered (sanitised,
// original bytes in Header.raw_key); a topic or type that is not UTF-8 makes
// the record poison.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/kafka/decoder.h"
#include "core/kafka/event_header.h"
#include "core/common/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/decoder_fixtures.h"

namespace ferry {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;
using ::ferry::testing::MustCreate;
using ::ferry::testing::Topic;
using ::testing::HasSubstr;
using Kind = FieldSource::Kind;

// Every string field of `message`, recursively, with its path.
void CollectStrings(const Message& message, const std::string& path,
                    std::vector<std::pair<std::string, std::string>>* out) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string name = path + "." + field->name();
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        const std::string item = name + "[" + std::to_string(i) + "]";
        if (field->type() == FieldDescriptor::TYPE_STRING) {
          out->emplace_back(item, reflection->GetRepeatedString(message, field, i));
        } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          CollectStrings(reflection->GetRepeatedMessage(message, field, i), item, out);
        }
      }
    } else if (field->type() == FieldDescriptor::TYPE_STRING) {
      out->emplace_back(name, reflection->GetString(message, field));
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectStrings(reflection->GetMessage(message, field), name, out);
    }
  }
}

// What a worker does with the Event: every string is valid UTF-8, and the
// bytes parse back into an equal Event.
void ExpectWorkerAccepts(const v1::Event& event, const std::string& input) {
  std::vector<std::pair<std::string, std::string>> strings;
  CollectStrings(event, "Event", &strings);
  for (const auto& [path, value] : strings) {
    EXPECT_TRUE(IsValidUtf8(value)) << path << " = \"" << absl::CHexEscape(value)
                                    << "\" from " << input;
  }
  v1::Events batch;
  *batch.add_events() = event;
  v1::ProcessRequest request;
  *request.mutable_events() = batch;
  v1::ProcessRequest parsed;
  EXPECT_TRUE(parsed.ParseFromString(request.SerializeAsString())) << input;
}

RawRecord Record(const std::string& topic) {
  RawRecord record;
  record.topic = topic;
  record.partition = 1;
  record.offset = 7;
  record.key = "k";
  return record;
}

TEST(DecoderUtf8Test, HeaderNameThatIsNotUtf8IsDeliveredWithItsOriginalBytes) {
  auto decoder = MustCreate({});
  RawRecord record = Record("orders");
  record.headers = {{"\xc3\x28", "v1"}, {"ok", "v2"}, {"a\xff\xfe" "b\xe2\x82", "v3"}};
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_TRUE(event.ok()) << event.status();
  ASSERT_EQ(event->headers_size(), 3);
  EXPECT_EQ(event->headers(0).key(), "\xEF\xBF\xBD(");
  EXPECT_EQ(event->headers(0).raw_key(), "\xc3\x28");
  EXPECT_EQ(event->headers(0).value(), "v1");
  EXPECT_EQ(event->headers(1).key(), "ok");
  EXPECT_EQ(event->headers(1).raw_key(), "") << "set only for names that need it";
  EXPECT_EQ(event->headers(2).key(),
            "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(event->headers(2).raw_key(), "a\xff\xfe" "b\xe2\x82");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(OriginalName(event->headers(i)), record.headers[static_cast<size_t>(i)].first);
  }
  ExpectWorkerAccepts(*event, "header names");
  // The moving Decode gives the same Event.
  absl::StatusOr<v1::Event> moved = decoder->Decode(RawRecord(record));
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->SerializeAsString(), event->SerializeAsString());
}

TEST(DecoderUtf8Test, TopicThatIsNotUtf8IsPoison) {
  auto decoder = MustCreate({});
  absl::StatusOr<v1::Event> event = decoder->Decode(Record("orders\xc3\x28"));
  ASSERT_FALSE(event.ok());
  EXPECT_EQ(event.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(event.status().message()), HasSubstr("topic name is not valid UTF-8"));
}

// A configured topic's name is checked once, when the Decoder is made; a
// configured name that is not UTF-8 still makes its records poison, and so
// does a type taken from it.
TEST(DecoderUtf8Test, ConfiguredTopicThatIsNotUtf8IsPoison) {
  const std::string bad = "orders\xc3\x28";
  auto decoder = MustCreate({Topic(bad, {Kind::kRecordKey, ""}, {Kind::kTopic, ""}),
                             Topic("ok", {Kind::kRecordKey, ""}, {Kind::kTopic, ""})});
  absl::StatusOr<v1::Event> event = decoder->Decode(Record(bad));
  ASSERT_FALSE(event.ok());
  EXPECT_THAT(std::string(event.status().message()), HasSubstr("topic name is not valid UTF-8"));
  EXPECT_TRUE(decoder->Decode(Record("ok")).ok());
}

TEST(DecoderUtf8Test, TypeFromAnySourceThatIsNotUtf8IsPoison) {
  auto decoder = MustCreate({Topic("h", {Kind::kRecordKey, ""}, {Kind::kHeader, "t"}),
                             Topic("k", {Kind::kTopic, ""}, {Kind::kRecordKey, ""})});
  RawRecord record = Record("h");
  record.headers = {{"t", "\xed\xa0\x80"}};  // an encoded surrogate
  EXPECT_FALSE(decoder->Decode(record).ok());
  record = Record("k");
  record.key = "\xc0\x80";  // overlong NUL
  absl::StatusOr<v1::Event> event = decoder->Decode(record);
  ASSERT_FALSE(event.ok());
  EXPECT_THAT(std::string(event.status().message()), HasSubstr("type: value from record_key"));
}

std::string RandomBytes(std::mt19937& rng, size_t max_size) {
  std::uniform_int_distribution<size_t> size(0, max_size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> pick(0, 5);
  static const char* const kPieces[] = {"\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                        "\xc3\xa9", "\xf0\x9f\x98\x80", "\xe2\x82"};
  std::string out;
  const size_t n = size(rng);
  while (out.size() < n) {
    if (pick(rng) == 0) {
      out += kPieces[static_cast<size_t>(byte(rng)) % 6];
    } else {
      out.push_back(static_cast<char>(byte(rng)));
    }
  }
  return out;
}

// A payload: random bytes, or JSON whose "type" is random bytes (raw, or as
// \u escapes that may be lone surrogates).
std::string RandomPayload(std::mt19937& rng) {
  std::uniform_int_distribution<int> shape(0, 2);
  const int kind = shape(rng);
  if (kind == 0) return RandomBytes(rng, 24);
  std::string type = RandomBytes(rng, 6);
  if (kind == 2) {
    std::uniform_int_distribution<int> unit(0, 0xFFFF);
    type = absl::StrCat("\\u", absl::Hex(unit(rng), absl::kZeroPad4), "\\u",
                        absl::Hex(unit(rng), absl::kZeroPad4));
  }
  return absl::StrCat("{\"type\":\"", type, "\",\"n\":1}");
}

TEST(DecoderUtf8Test, EveryEventFromMalformedRecordsIsAcceptedByWorkers) {
  auto decoder = MustCreate({Topic("json", {Kind::kJson, "/n"}, {Kind::kJson, "/type"}),
                             Topic("header", {Kind::kHeader, "k"}, {Kind::kHeader, "t"}),
                             Topic("key", {Kind::kRecordKey, ""}, {Kind::kRecordKey, ""})});
  static const char* const kTopics[] = {"json", "header", "key", "other"};
  std::mt19937 rng(20);  // fixed seed: the same inputs on every run
  std::uniform_int_distribution<int> choice(0, 4);
  int delivered = 0;
  int poison = 0;
  for (int i = 0; i < 20000; ++i) {
    const int topic = choice(rng);
    RawRecord record = Record(topic == 4 ? RandomBytes(rng, 8) : kTopics[topic]);
    if (choice(rng) != 0) record.key = RandomBytes(rng, 8);
    record.payload = RandomPayload(rng);
    const int headers = choice(rng);
    for (int h = 0; h < headers; ++h) {
      record.headers.emplace_back(RandomBytes(rng, 6), RandomBytes(rng, 6));
    }
    if (choice(rng) < 2) record.headers.emplace_back("t", RandomBytes(rng, 6));
    if (choice(rng) < 2) record.headers.emplace_back("k", RandomBytes(rng, 6));
    const std::string input = absl::StrCat("input #", i);
    absl::StatusOr<v1::Event> event = decoder->Decode(record);
    if (!event.ok()) {
      EXPECT_EQ(event.status().code(), absl::StatusCode::kInvalidArgument) << input;
      ++poison;
      continue;
    }
    ++delivered;
    ExpectWorkerAccepts(*event, input);
    ASSERT_EQ(event->headers_size(), static_cast<int>(record.headers.size())) << input;
    for (int h = 0; h < event->headers_size(); ++h) {
      const auto& [name, value] = record.headers[static_cast<size_t>(h)];
      EXPECT_EQ(OriginalName(event->headers(h)), name) << input;
      EXPECT_EQ(event->headers(h).value(), value) << input;
    }
    if (HasFailure()) break;
  }
  // Both outcomes were exercised.
  EXPECT_GT(delivered, 1000);
  EXPECT_GT(poison, 1000);
}

TEST(DecoderUtf8Test, ToValidUtf8KeepsValidTextAndReplacesEachBadByte) {
  EXPECT_EQ(ToValidUtf8(""), "");
  EXPECT_EQ(ToValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(ToValidUtf8("\xff"), "\xEF\xBF\xBD");
  EXPECT_EQ(ToValidUtf8("x\xc3"), "x\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xed\xa0\x80\xc0\x80\xf8\x88\x80\x80\x80")));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace ferry
