// Dead letters carry the record as it was in Kafka: a header name that is not
// UTF-8 (sanitised in the Event a worker sees, original bytes in raw_key) goes
// back to Kafka with its original bytes, for failed events and poison alike;
// a poison record names no processor.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/kafka/decoder.h"
#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

const std::vector<std::pair<std::string, std::string>> kHeaders = {
    {"\xc3\x28", "v1"}, {"trace", "v2"}, {std::string("a\0\xff", 3), ""}};

// The base engine test config, smaller, with a single attempt so a FAIL is
// dead-lettered at once, and the ProcessorConfig default backoff ceiling.
Config TestConfig() {
  Config config = EngineTestConfig(FailurePolicy::kDeadLetter);
  config.processors[0].max_in_flight = 100;
  config.processors[0].max_attempts = 1;
  config.processors[0].retry_backoff_max = absl::Seconds(30);
  config.lane_count = 4;
  config.max_buffered_events = 100;
  return config;
}

RawRecord Record(int64_t offset) {
  RawRecord record;
  record.topic = "t";
  record.partition = 0;
  record.offset = offset;
  record.key = "k";
  record.payload = "body";
  record.headers = kHeaders;
  return record;
}

class EngineDeadLetterTest : public ::testing::Test, public EngineHarness {
 protected:
  EngineDeadLetterTest() : EngineHarness(TestConfig(), {{"t", 0}}) {}
};

TEST_F(EngineDeadLetterTest, FailedEventIsDeadLetteredWithItsOriginalHeaderNames) {
  FakeWorkerStream stream("s");
  const int64_t stream_id = Connect(*engine_, stream, 10);
  std::unique_ptr<Decoder> decoder = Decoder::Create(TestConfig().topics).value();
  RawRecord record = Record(0);
  v1::Event event = decoder->Decode(record).value();
  engine_->Submit(std::move(event), record.ByteSize(), record.key);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].headers(0).key(), "\xEF\xBF\xBD(") << "the worker sees valid UTF-8";
  engine_->OnResults(stream_id, ResultFor(sent[0].id(), v1::Result::FAIL));
  ASSERT_EQ(writer_.written().size(), 1u);
  EXPECT_EQ(writer_.written()[0].headers, kHeaders);
  EXPECT_EQ(writer_.written()[0].processor, "p");
  writer_.Complete();
  EXPECT_EQ(CommitOffset(*engine_), 1);
}

TEST_F(EngineDeadLetterTest, PoisonRecordIsDeadLetteredWithItsOriginalHeaderNames) {
  engine_->SubmitPoison(Record(0), "undecodable");
  ASSERT_EQ(writer_.written().size(), 1u);
  EXPECT_EQ(writer_.written()[0].headers, kHeaders);
  EXPECT_EQ(writer_.written()[0].processor, "") << "no processor took a poison record";
  EXPECT_EQ(writer_.written()[0].attempts, 0);
  writer_.Complete();
  EXPECT_EQ(CommitOffset(*engine_), 1);
}

}  // namespace
}  // namespace ferry::testing
