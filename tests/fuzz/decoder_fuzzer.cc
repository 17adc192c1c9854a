// Fuzz target: the decoder (core/kafka/decoder.h) on records with arbitrary keys,
// headers, payloads (JSON or not) and a decode config derived from the input.
//
// Properties checked on every input:
//   * Decode never crashes or throws; an error is a fine answer (poison).
//   * Both Decode overloads agree; the moving one leaves the record whole on
//     an error (it becomes the dead letter).
//   * An Event carries the record unchanged (topic, partition, offset,
//     payload, headers in order, timestamp).
//   * Every proto3 `string` field of the Event is valid UTF-8, and the Event
//     parses back: a conforming worker must never have to reject it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/kafka/decoder.h"
#include "core/kafka/record.h"
#include "ferry/v1/processor.pb.h"
#include "tests/fuzz/utf8.h"

namespace {

using ::ferry::FieldSource;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "decoder fuzzer: %s\n", what.c_str());
  std::abort();
}

FieldSource SourceFrom(FuzzedDataProvider& input) {
  static constexpr FieldSource::Kind kKinds[] = {
      FieldSource::Kind::kRecordKey, FieldSource::Kind::kHeader, FieldSource::Kind::kJson,
      FieldSource::Kind::kTopic, FieldSource::Kind::kConstant};
  FieldSource source;
  source.kind = input.PickValueInArray(kKinds);
  source.argument = input.ConsumeRandomLengthString(24);
  return source;
}

ferry::RawRecord RecordFrom(FuzzedDataProvider& input, const std::string& configured_topic,
                            std::string payload) {
  ferry::RawRecord record;
  record.payload = std::move(payload);
  // Kafka topic names are [a-zA-Z0-9._-]: the record's topic is the
  // configured one or another legal name, never arbitrary bytes.
  record.topic = input.ConsumeBool() ? configured_topic : "other.topic_1";
  record.partition = input.ConsumeIntegral<int32_t>();
  record.offset = input.ConsumeIntegral<int64_t>();
  if (input.ConsumeBool()) record.key = input.ConsumeRandomLengthString(64);
  const int headers = input.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < headers; ++i) {
    std::string name = input.ConsumeRandomLengthString(32);
    std::string value = input.ConsumeRandomLengthString(64);
    record.headers.emplace_back(std::move(name), std::move(value));
  }
  record.timestamp_ms = input.ConsumeIntegral<int64_t>();
  return record;
}

void CheckUtf8(const std::string& field, const std::string& value) {
  if (!ferry::fuzz::IsUtf8(value)) {
    Fail("Event." + field + " is not valid UTF-8 (a proto3 string; workers reject the message)");
  }
}

void CheckEvent(const ferry::RawRecord& record, const ferry::v1::Event& event) {
  if (event.topic() != record.topic || event.partition() != record.partition ||
      event.offset() != record.offset || event.payload() != record.payload ||
      event.timestamp_ms() != record.timestamp_ms) {
    Fail("the Event does not carry the record's topic/partition/offset/payload/timestamp");
  }
  if (event.headers_size() != static_cast<int>(record.headers.size())) {
    Fail("the Event lost or added headers");
  }
  CheckUtf8("topic", event.topic());
  CheckUtf8("type", event.type());
  for (int i = 0; i < event.headers_size(); ++i) {
    const ferry::v1::Header& header = event.headers(i);
    const std::string& name = record.headers[i].first;
    CheckUtf8("headers[" + std::to_string(i) + "].key", header.key());
    // A UTF-8 name travels unchanged in `key`; any other in `raw_key` (bytes).
    if (ferry::fuzz::IsUtf8(name) ? header.key() != name || !header.raw_key().empty()
                                  : header.raw_key() != name) {
      Fail("header " + std::to_string(i) + "'s name is not carried as processor.proto says");
    }
    // Header values are `bytes`: anything goes, but nothing may change.
    if (header.value() != record.headers[i].second) Fail("a header value changed");
  }
  // What a worker does with it: serialize, parse.
  std::string wire;
  if (!event.SerializeToString(&wire)) Fail("the Event does not serialize");
  ferry::v1::Event parsed;
  if (!parsed.ParseFromString(wire)) Fail("the Event's wire bytes do not parse as an Event");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  // The payload first (its length from the input's last two bytes), so a
  // seed can start with a readable JSON document.
  std::string payload = input.ConsumeBytesAsString(input.ConsumeIntegral<uint16_t>());
  ferry::TopicConfig topic;
  topic.name = "orders";
  topic.key = SourceFrom(input);
  topic.type = SourceFrom(input);
  absl::StatusOr<std::unique_ptr<ferry::Decoder>> decoder = ferry::Decoder::Create({topic});
  if (!decoder.ok()) return 0;  // an invalid JSON pointer: the config is refused
  const ferry::RawRecord record = RecordFrom(input, topic.name, std::move(payload));

  absl::StatusOr<ferry::v1::Event> copied = (*decoder)->Decode(record);
  ferry::RawRecord moved_from = record;
  absl::StatusOr<ferry::v1::Event> moved = (*decoder)->Decode(std::move(moved_from));
  if (copied.ok() != moved.ok()) Fail("the two Decode overloads disagree");
  if (!copied.ok()) {
    if (copied.status() != moved.status()) Fail("the two Decode overloads fail differently");
    if (moved_from.payload != record.payload || moved_from.headers != record.headers ||
        moved_from.key != record.key || moved_from.topic != record.topic) {
      Fail("Decode(RawRecord&&) consumed a record it failed on (the dead letter loses it)");
    }
    return 0;
  }
  if (copied->SerializeAsString() != moved->SerializeAsString()) {
    Fail("the two Decode overloads make different Events");
  }
  CheckEvent(record, *copied);
  return 0;
}
